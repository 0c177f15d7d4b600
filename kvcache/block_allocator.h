// The simplest block bookkeeping: a free list of KV block ids and a per-sequence
// block table. kvcache/ never touches KV data, only says which block holds
// which tokens. (Reference counts, prefix hashing and eviction come with the
// full block manager.)
#pragma once

#include <cstdint>
#include <vector>

namespace minfer {

class BlockAllocator {
public:
    explicit BlockAllocator(int32_t num_blocks);
    int32_t num_blocks() const { return num_blocks_; }
    int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
    // Throws std::runtime_error when none is free.
    int32_t allocate();
    void release(int32_t block);

private:
    int32_t num_blocks_;
    std::vector<int32_t> free_;  // a stack: the most recently freed block is reused first
};

// Which blocks hold one sequence's tokens: token t lives in blocks[t / block_size].
class BlockTable {
public:
    BlockTable(BlockAllocator& allocator, int32_t block_size) : allocator_(allocator), block_size_(block_size) {}
    ~BlockTable();
    BlockTable(const BlockTable&) = delete;
    BlockTable& operator=(const BlockTable&) = delete;

    // Makes room for `num_tokens` tokens in total, allocating blocks as needed.
    void reserve(int32_t num_tokens);
    int32_t slot(int32_t position) const;  // block * block_size + offset
    const std::vector<int32_t>& blocks() const { return blocks_; }

private:
    BlockAllocator& allocator_;
    int32_t block_size_;
    std::vector<int32_t> blocks_;
};

}  // namespace minfer
