#include "kvcache/block_manager.h"

#include <algorithm>
#include <stdexcept>
#include <string>

// Header-only use of xxHash: nothing to link. (GCC 12 warns about its AVX-512 path, inside GCC's own
// intrinsics, a known false positive.)
#define XXH_INLINE_ALL
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <xxhash.h>
#pragma GCC diagnostic pop

namespace minfer {

namespace {

// The blocks that a write of tokens [from, to) touches: [first, last).
struct BlockRange {
    int32_t first = 0, last = 0;
};

BlockRange written_blocks(int32_t from, int32_t to, int32_t block_size) {
    if (from >= to) return {};
    return {from / block_size, (to + block_size - 1) / block_size};
}

void check_range(int32_t num_computed, int32_t num_tokens, int32_t capacity) {
    if (num_computed < 0 || num_computed > num_tokens)
        throw std::invalid_argument("need 0 <= num_computed <= num_tokens, got " + std::to_string(num_computed) +
                                    " and " + std::to_string(num_tokens));
    // Computed tokens must already have blocks to live in.
    if (num_computed > capacity)
        throw std::logic_error(std::to_string(num_computed) + " computed tokens but blocks for only " +
                               std::to_string(capacity));
}

}  // namespace

uint64_t hash_block(std::span<const int32_t> tokens, uint64_t parent) {
    return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), parent);
}

BlockManager::BlockManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching, BlockHashFn hash)
    : num_blocks_(num_blocks), block_size_(block_size), enable_prefix_caching_(enable_prefix_caching), hash_(hash) {
    if (num_blocks <= 0) throw std::invalid_argument("the KV pool needs at least one block");
    if (block_size <= 0) throw std::invalid_argument("block_size must be > 0");
    if (!hash) throw std::invalid_argument("no block hash function");
    blocks_.resize(num_blocks);
    // A stack: block 0 is handed out first, and a freed block is reused first.
    for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

int32_t BlockManager::num_free_blocks() const {
    return static_cast<int32_t>(free_.size() + evictable_.size());
}

double BlockManager::usage() const {
    return double(num_blocks_ - num_free_blocks()) / num_blocks_;
}

// ---- the pool -------------------------------------------------------------------------

int32_t BlockManager::take_block() {
    int32_t b;
    if (!free_.empty()) {  // a plain free block costs nothing; evicting loses a cached prefix
        b = free_.back();
        free_.pop_back();
    } else if (!evictable_.empty()) {
        b = evictable_.begin()->second;
        evictable_.erase(evictable_.begin());
        uncommit(b);
    } else {
        throw std::logic_error("take_block: the KV pool is empty (allocate checks this first)");
    }
    blocks_[b].ref_count = 1;
    return b;
}

void BlockManager::release(int32_t block) {
    if (block < 0 || block >= num_blocks_) throw std::logic_error("release of unknown block " + std::to_string(block));
    Block& blk = blocks_[block];
    if (blk.ref_count <= 0) throw std::logic_error("release of block " + std::to_string(block) + ", which is free");
    if (--blk.ref_count > 0) return;
    if (blk.committed) {
        // Only an unreferenced block can be evicted, so the time it was last released is its recency.
        blk.last_used = ++clock_;
        evictable_.insert({blk.last_used, block});
    } else {
        free_.push_back(block);
    }
}

void BlockManager::borrow(int32_t block) {
    Block& blk = blocks_[block];
    if (blk.ref_count == 0) evictable_.erase({blk.last_used, block});
    ++blk.ref_count;
}

// ---- the prefix cache -----------------------------------------------------------------

int32_t BlockManager::cached_block(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens) const {
    auto it = cached_.find(hash);
    if (it == cached_.end()) return -1;
    // The hash is only a key: compare what it was made from, so that a collision is never a hit.
    const Block& blk = blocks_[it->second];
    if (blk.parent != parent || !std::equal(tokens.begin(), tokens.end(), blk.tokens.begin(), blk.tokens.end()))
        return -1;
    return it->second;
}

void BlockManager::commit_block(int32_t block, uint64_t hash, uint64_t parent, std::span<const int32_t> tokens) {
    Block& blk = blocks_[block];
    blk.committed = true;
    blk.hash = hash;
    blk.parent = parent;
    blk.tokens.assign(tokens.begin(), tokens.end());
    cached_[hash] = block;
}

void BlockManager::uncommit(int32_t block) {
    Block& blk = blocks_[block];
    if (!blk.committed) return;
    cached_.erase(blk.hash);
    blk.committed = false;
    blk.tokens.clear();
}

int32_t BlockManager::match_prefix(std::span<const int32_t> tokens, BlockList& list) {
    if (!list.blocks.empty() || !list.hashes.empty()) throw std::logic_error("match_prefix needs an empty block list");
    if (!enable_prefix_caching_ || tokens.empty()) return 0;
    stats_.queries += static_cast<int64_t>(tokens.size());
    // Leave at least the last token to compute: its logits are needed.
    const size_t max_blocks = (tokens.size() - 1) / block_size_;
    uint64_t parent = kFirstBlockParent;
    for (size_t i = 0; i < max_blocks; ++i) {
        const auto chunk = tokens.subspan(i * block_size_, block_size_);
        const uint64_t hash = hash_(chunk, parent);
        const int32_t b = cached_block(hash, parent, chunk);
        if (b < 0) break;
        borrow(b);
        list.blocks.push_back(b);
        list.hashes.push_back(hash);
        parent = hash;
    }
    const int32_t covered = capacity(list);
    stats_.hits += covered;
    return covered;
}

void BlockManager::cancel_prefix_match(BlockList& list, int64_t tokens_queried) {
    if (enable_prefix_caching_ && tokens_queried > 0) {
        stats_.queries -= tokens_queried;
        stats_.hits -= capacity(list);
    }
    free(list);
}

void BlockManager::commit(BlockList& list, std::span<const int32_t> tokens, int32_t num_computed) {
    if (num_computed > static_cast<int64_t>(tokens.size()))
        throw std::invalid_argument("commit: more computed tokens than tokens");
    check_range(num_computed, num_computed, capacity(list));
    if (!enable_prefix_caching_) return;
    uint64_t parent = list.hashes.empty() ? kFirstBlockParent : list.hashes.back();
    for (size_t i = list.hashes.size(); i < size_t(num_computed / block_size_); ++i) {
        const auto chunk = tokens.subspan(i * block_size_, block_size_);
        const uint64_t hash = hash_(chunk, parent);
        const int32_t b = list.blocks[i];
        // allocate and truncate uncommit a block before it is written again: if committed, it holds these tokens.
        if (blocks_[b].committed && blocks_[b].hash != hash)
            throw std::logic_error("commit: block " + std::to_string(b) + " is committed with other tokens");
        // If another block already holds this hash (another sequence computed the same prefix, or a
        // collision), that entry stays: ours remains uncommitted and goes back to the free list when released.
        if (!cached_.contains(hash)) commit_block(b, hash, parent, chunk);
        list.hashes.push_back(hash);
        parent = hash;
    }
}

// ---- sequences ------------------------------------------------------------------------

int32_t BlockManager::blocks_needed(const BlockList& list, int32_t num_computed, int32_t num_tokens) const {
    const int32_t have = static_cast<int32_t>(list.blocks.size());
    const BlockRange w = written_blocks(num_computed, num_tokens, block_size_);
    int32_t needed = std::max(0, w.last - have);
    for (int32_t i = w.first; i < std::min(w.last, have); ++i)
        if (blocks_[list.blocks[i]].ref_count > 1) ++needed;  // copy-on-write
    return needed;
}

bool BlockManager::allocate(BlockList& list, int32_t num_computed, int32_t num_tokens,
                            std::vector<BlockCopy>& copies) {
    check_range(num_computed, num_tokens, capacity(list));
    if (blocks_needed(list, num_computed, num_tokens) > num_free_blocks()) return false;

    const BlockRange w = written_blocks(num_computed, num_tokens, block_size_);
    for (int32_t i = w.first; i < std::min<int32_t>(w.last, list.blocks.size()); ++i) {
        const int32_t b = list.blocks[i];
        if (blocks_[b].ref_count > 1) {
            // Others still read this block: write into a copy of it.
            const int32_t copy = take_block();
            copies.push_back({b, copy});
            release(b);
            list.blocks[i] = copy;
        } else {
            // Ours alone, but possibly still committed (after truncate): its cached tokens are about to change.
            uncommit(b);
        }
    }
    while (int32_t(list.blocks.size()) < w.last) list.blocks.push_back(take_block());
    // The chain covers only blocks that keep their tokens.
    if (int32_t(list.hashes.size()) > w.first && w.first < w.last) list.hashes.resize(w.first);
    return true;
}

void BlockManager::check_held(const BlockList& list, const char* what) const {
    for (int32_t b : list.blocks)
        if (b < 0 || b >= num_blocks_ || blocks_[b].ref_count <= 0)
            throw std::logic_error(std::string(what) + " of a list holding block " + std::to_string(b) +
                                   ", which is not in use");
}

BlockList BlockManager::fork(const BlockList& list) {
    check_held(list, "fork");
    for (int32_t b : list.blocks) ++blocks_[b].ref_count;
    return list;
}

void BlockManager::free(BlockList& list) {
    check_held(list, "free");  // before anything changes
    // Last block first: a prefix's tail then becomes evictable before its head, so eviction
    // never strands cached tail blocks behind an evicted head (a lookup stops at the first miss).
    for (auto it = list.blocks.rbegin(); it != list.blocks.rend(); ++it) release(*it);
    list.blocks.clear();
    list.hashes.clear();
}

void BlockManager::truncate(BlockList& list, int32_t num_tokens) {
    if (num_tokens < 0 || num_tokens > capacity(list))
        throw std::invalid_argument("truncate to " + std::to_string(num_tokens) + " tokens of a list holding " +
                                    std::to_string(capacity(list)));
    const size_t keep = (size_t(num_tokens) + block_size_ - 1) / block_size_;
    while (list.blocks.size() > keep) {
        release(list.blocks.back());
        list.blocks.pop_back();
    }
    const size_t full = num_tokens / block_size_;
    if (list.hashes.size() > full) list.hashes.resize(full);
    // The partly kept block will be written again. If nobody else holds it, its cached tokens are about
    // to go stale: uncommit it now. If it is shared, it stays (the others still read it); allocate copies it.
    if (num_tokens % block_size_ != 0 && blocks_[list.blocks[full]].ref_count == 1) uncommit(list.blocks[full]);
}

// ---- checks ---------------------------------------------------------------------------

void BlockManager::check_invariants() const {
    auto fail = [](const std::string& what) { throw std::logic_error("BlockManager: " + what); };
    std::vector<int> places(num_blocks_, 0);  // free list + evictable set: each free block exactly once
    for (int32_t b : free_) {
        if (b < 0 || b >= num_blocks_) fail("unknown block in the free list");
        if (blocks_[b].committed) fail("committed block " + std::to_string(b) + " in the free list");
        ++places[b];
    }
    for (const auto& [t, b] : evictable_) {
        if (!blocks_[b].committed) fail("uncommitted block " + std::to_string(b) + " in the evictable set");
        if (blocks_[b].last_used != t) fail("stale LRU entry for block " + std::to_string(b));
        ++places[b];
    }
    for (int32_t b = 0; b < num_blocks_; ++b) {
        const Block& blk = blocks_[b];
        if (blk.ref_count < 0) fail("negative reference count of block " + std::to_string(b));
        if (places[b] != (blk.ref_count == 0 ? 1 : 0))
            fail("block " + std::to_string(b) + " is " + (blk.ref_count ? "held" : "free") + " and in " +
                 std::to_string(places[b]) + " free places");
        if (blk.committed) {
            auto it = cached_.find(blk.hash);
            if (it == cached_.end() || it->second != b) fail("committed block " + std::to_string(b) + " not cached");
        }
    }
    for (const auto& [hash, b] : cached_) {
        const Block& blk = blocks_[b];
        if (!blk.committed || blk.hash != hash) fail("cache entry for block " + std::to_string(b) + " is stale");
        if (int32_t(blk.tokens.size()) != block_size_ || hash_(blk.tokens, blk.parent) != hash)
            fail("block " + std::to_string(b) + " does not hash to its cache key");
    }
    if (!enable_prefix_caching_ && !cached_.empty()) fail("cached blocks with prefix caching off");
}

}  // namespace minfer
