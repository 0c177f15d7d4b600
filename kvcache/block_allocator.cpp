#include "kvcache/block_allocator.h"

#include <stdexcept>
#include <string>

namespace minfer {

BlockAllocator::BlockAllocator(int32_t num_blocks) : num_blocks_(num_blocks) {
    if (num_blocks <= 0) throw std::invalid_argument("the KV pool needs at least one block");
    for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

int32_t BlockAllocator::allocate() {
    if (free_.empty()) throw std::runtime_error("out of KV cache blocks (" + std::to_string(num_blocks_) + " in the pool)");
    const int32_t b = free_.back();
    free_.pop_back();
    return b;
}

void BlockAllocator::release(int32_t block) {
    if (block < 0 || block >= num_blocks_) throw std::out_of_range("release of an unknown block");
    free_.push_back(block);
}

BlockTable::~BlockTable() {
    for (int32_t b : blocks_) allocator_.release(b);
}

void BlockTable::reserve(int32_t num_tokens) {
    while (int64_t(blocks_.size()) * block_size_ < num_tokens) blocks_.push_back(allocator_.allocate());
}

int32_t BlockTable::slot(int32_t position) const {
    return blocks_.at(position / block_size_) * block_size_ + position % block_size_;
}

}  // namespace minfer
