// The block manager: which KV block holds which tokens of which sequence.
//
// A pool of fixed-size blocks, handed out to sequences through their block
// lists, with reference counts so that blocks can be shared:
//  - prefix caching: a full block whose K/V have been computed is committed
//    under a hash chain (the parent block's hash and the block's tokens). A new
//    sequence whose prompt starts with the same tokens borrows those blocks
//    instead of recomputing them. A committed block nobody holds stays in the
//    cache, evictable, until the pool needs it (least recently used first).
//  - copy-on-write: a forked sequence (parallel samples, n > 1) shares every
//    block of its parent; the first write into a shared block gives the writer
//    its own copy, which the runner makes on the device before the step.
//
// Like the rest of kvcache/, it never touches K/V data: it only decides block
// ids, and reports the copies that the runner must make.
#pragma once

#include <cstdint>
#include <set>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

namespace minfer {

// One sequence's blocks: token t lives in blocks[t / block_size].
struct BlockList {
    std::vector<int32_t> blocks;
    // Hash chain of the leading full blocks that are computed and committed (or
    // found in the cache, or cached by another block with the same tokens):
    // hashes[i] identifies the tokens of blocks[0..i].
    std::vector<uint64_t> hashes;
};

// K/V of block `src` must be copied into block `dst` before the step runs.
struct BlockCopy {
    int32_t src;
    int32_t dst;
};

// The hash of one full block, chained to its parent's: hash_block(tokens of
// block i, hash of block i - 1), with kFirstBlockParent for block 0.
using BlockHashFn = uint64_t (*)(std::span<const int32_t> tokens, uint64_t parent);
uint64_t hash_block(std::span<const int32_t> tokens, uint64_t parent);  // XXH3, seeded with the parent
inline constexpr uint64_t kFirstBlockParent = 0x6d696e6665720001;  // any fixed value

struct PrefixCacheStats {
    int64_t queries = 0;  // prompt tokens looked up
    int64_t hits = 0;     // of those, tokens found in the cache
};

class BlockManager {
public:
    // `hash` is replaceable so that tests can force collisions.
    BlockManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching = true,
                 BlockHashFn hash = hash_block);

    int32_t num_blocks() const { return num_blocks_; }
    int32_t block_size() const { return block_size_; }
    // Blocks that can be handed out now: never used, freed, or cached but unreferenced.
    int32_t num_free_blocks() const;
    // Fraction of the pool referenced by some sequence (cached-but-free blocks count as free).
    double usage() const;
    const PrefixCacheStats& prefix_cache_stats() const { return stats_; }
    bool prefix_caching() const { return enable_prefix_caching_; }

    // For a sequence with an empty list: borrows the cached blocks that hold the
    // longest run of whole leading blocks of `tokens`, verified token by token,
    // but never all of `tokens` (the last token is always computed, so that its
    // logits exist). Returns the number of tokens covered (a multiple of
    // block_size). Counts tokens.size() queries and the result as hits.
    int32_t match_prefix(std::span<const int32_t> tokens, BlockList& list);
    // Undoes match_prefix when the sequence cannot be admitted after all: gives
    // the borrowed blocks back and takes the lookup out of the statistics, so a
    // request that waits several steps is counted once, when it is admitted.
    void cancel_prefix_match(BlockList& list, int64_t tokens_queried);

    // Blocks that allocate(list, num_computed, num_tokens) would take from the pool.
    int32_t blocks_needed(const BlockList& list, int32_t num_computed, int32_t num_tokens) const;

    // Makes `list` hold num_tokens tokens, of which the first num_computed are
    // already in the cache and [num_computed, num_tokens) will be written by the
    // next step. A block about to be written that is shared (reference count > 1)
    // is replaced by a fresh copy, reported in `copies`. Returns false and changes
    // nothing if the pool has too few blocks (evicting cached-but-free blocks,
    // least recently used first, as needed).
    bool allocate(BlockList& list, int32_t num_computed, int32_t num_tokens, std::vector<BlockCopy>& copies);

    // The first num_computed tokens of `tokens` now have their K/V in the list's
    // blocks: commits every full block among them that is not committed yet.
    void commit(BlockList& list, std::span<const int32_t> tokens, int32_t num_computed);

    // A new list that shares every block of `list` (each reference count + 1).
    BlockList fork(const BlockList& list);

    // Drops the list's references; blocks nobody holds go back to the pool
    // (committed ones stay cached until evicted). The list is left empty.
    void free(BlockList& list);

    // Keeps only the first num_tokens tokens (speculative rollback): blocks past
    // them are dropped, and the block that will be written again, if committed,
    // is no longer part of the list's hash chain.
    void truncate(BlockList& list, int32_t num_tokens);

    int32_t ref_count(int32_t block) const { return blocks_[block].ref_count; }

    // Throws std::logic_error if the pool's bookkeeping is inconsistent (free list,
    // evictable set, cache map, stored hashes). O(num_blocks): for tests.
    void check_invariants() const;

private:
    struct Block {
        int32_t ref_count = 0;
        bool committed = false;       // in cached_ under `hash`
        uint64_t hash = 0;            // valid when committed
        uint64_t parent = 0;          // the hash it was chained to, to verify a hash hit
        std::vector<int32_t> tokens;  // the committed tokens, to verify a hash hit
        uint64_t last_used = 0;       // when it was last released: the LRU order of evictable blocks
    };

    int32_t cached_block(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens) const;
    void borrow(int32_t block);          // reference count + 1 of a cached block
    int32_t take_block();                // a free block, evicting the LRU cached one if needed
    void release(int32_t block);         // reference count - 1
    void commit_block(int32_t block, uint64_t hash, uint64_t parent, std::span<const int32_t> tokens);
    void uncommit(int32_t block);
    void check_held(const BlockList& list, const char* what) const;  // std::logic_error if not
    int32_t capacity(const BlockList& list) const { return int32_t(list.blocks.size()) * block_size_; }

    int32_t num_blocks_;
    int32_t block_size_;
    bool enable_prefix_caching_;
    BlockHashFn hash_;
    std::vector<Block> blocks_;
    std::vector<int32_t> free_;                       // never used or uncommitted, unreferenced
    std::set<std::pair<uint64_t, int32_t>> evictable_;  // (last_used, block): committed, unreferenced
    std::unordered_map<uint64_t, int32_t> cached_;    // hash -> committed block
    uint64_t clock_ = 0;
    PrefixCacheStats stats_;
};

}  // namespace minfer
