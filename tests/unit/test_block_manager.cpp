// BlockManager by hand-made cases: allocation, prefix caching and eviction, copy-on-write, truncation, misuse.
#include <doctest/doctest.h>

#include <algorithm>
#include <initializer_list>
#include <map>
#include <numeric>
#include <random>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "block_manager_test_util.h"
#include "kvcache/block_manager.h"

using minfer::BlockCopy;
using minfer::BlockList;
using minfer::BlockManager;
using namespace minfer::block_manager_test;

namespace {

std::vector<int32_t> iota_tokens(int32_t n, int32_t start = 100) {
    std::vector<int32_t> t(n);
    std::iota(t.begin(), t.end(), start);
    return t;
}

// A sequence's first step: room for all of `tokens`, then their K/V are computed and committed.
BlockList prefill(BlockManager& m, const std::vector<int32_t>& tokens) {
    BlockList list;
    std::vector<BlockCopy> copies;
    REQUIRE(m.allocate(list, 0, int32_t(tokens.size()), copies));
    CHECK(copies.empty());
    m.commit(list, tokens, int32_t(tokens.size()));
    return list;
}

// Two lists holding the same blocks: a, prefilled with `tokens`, and b, its fork.
std::pair<BlockList, BlockList> prefill_and_fork(BlockManager& m, const std::vector<int32_t>& tokens) {
    BlockList a = prefill(m, tokens);
    BlockList b = m.fork(a);
    return {std::move(a), std::move(b)};
}

// Frees the lists; then the whole pool must be free again (nothing leaked) and consistent.
void free_all(BlockManager& m, std::initializer_list<BlockList*> lists) {
    for (BlockList* list : lists) m.free(*list);
    CHECK(m.num_free_blocks() == m.num_blocks());
    m.check_invariants();
}

}  // namespace

TEST_CASE("block manager: bad construction throws") {
    CHECK_THROWS_AS(BlockManager(0, 16), std::invalid_argument);
    CHECK_THROWS_AS(BlockManager(-1, 16), std::invalid_argument);
    CHECK_THROWS_AS(BlockManager(8, 0), std::invalid_argument);
    CHECK_THROWS_AS(BlockManager(8, -4), std::invalid_argument);
    CHECK_THROWS_AS(BlockManager(8, 16, true, nullptr), std::invalid_argument);
}

TEST_CASE("block manager: allocate and free without leaks") {
    BlockManager m(10, 4);
    CHECK(m.num_free_blocks() == 10);
    CHECK(m.usage() == 0.0);
    BlockList a, b;
    std::vector<BlockCopy> copies;
    CHECK(m.blocks_needed(a, 0, 9) == 3);
    REQUIRE(m.allocate(a, 0, 9, copies));
    CHECK(a.blocks.size() == 3);
    CHECK(m.num_free_blocks() == 7);
    CHECK(m.blocks_needed(a, 9, 12) == 0);  // the third block has room
    REQUIRE(m.allocate(a, 9, 12, copies));
    CHECK(a.blocks.size() == 3);
    REQUIRE(m.allocate(b, 0, 4, copies));
    CHECK(m.num_free_blocks() == 6);
    CHECK(m.usage() == doctest::Approx(0.4));
    for (int32_t blk : a.blocks) CHECK(m.ref_count(blk) == 1);
    CHECK(std::find(a.blocks.begin(), a.blocks.end(), b.blocks[0]) == a.blocks.end());
    CHECK(copies.empty());
    m.free(a);
    m.free(b);
    CHECK(a.blocks.empty());
    CHECK(m.num_free_blocks() == 10);
    CHECK(m.usage() == 0.0);
    m.check_invariants();
}

TEST_CASE("block manager: a committed prefix is borrowed after its sequence is freed") {
    BlockManager m(8, 16);
    const auto prompt = iota_tokens(40);  // two full blocks and 8 tokens
    BlockList a = prefill(m, prompt);
    REQUIRE(a.hashes.size() == 2);
    CHECK(a.hashes[0] == minfer::hash_block(std::span(prompt).first(16), minfer::kFirstBlockParent));
    CHECK(a.hashes[1] == minfer::hash_block(std::span(prompt).subspan(16, 16), a.hashes[0]));
    const std::vector<int32_t> held = a.blocks;
    m.free(a);
    CHECK(m.num_free_blocks() == 8);  // cached-but-free blocks count as free
    CHECK(m.usage() == 0.0);

    // Same first 32 tokens, another tail.
    const auto query = concat(std::vector<int32_t>(prompt.begin(), prompt.begin() + 32), iota_tokens(5, 7));
    BlockList b;
    CHECK(m.match_prefix(query, b) == 32);
    CHECK(b.blocks == std::vector<int32_t>{held[0], held[1]});
    CHECK(b.hashes.size() == 2);
    CHECK(m.ref_count(held[0]) == 1);
    CHECK(m.num_free_blocks() == 6);
    CHECK(m.prefix_cache_stats().queries == 37);
    CHECK(m.prefix_cache_stats().hits == 32);

    // A second borrower shares them.
    BlockList c;
    CHECK(m.match_prefix(query, c) == 32);
    CHECK(c.blocks == b.blocks);
    CHECK(m.ref_count(held[0]) == 2);
    CHECK(m.prefix_cache_stats().queries == 74);
    CHECK(m.prefix_cache_stats().hits == 64);

    // Only whole leading blocks: a different first block means no hit at all.
    auto other = query;
    other[3] = -5;
    BlockList d;
    CHECK(m.match_prefix(other, d) == 0);
    CHECK(d.blocks.empty());
    CHECK(m.prefix_cache_stats().hits == 64);

    // A lookup whose sequence is not admitted after all is given back, blocks and statistics.
    BlockList e;
    CHECK(m.match_prefix(query, e) == 32);
    CHECK(m.ref_count(held[0]) == 3);
    m.cancel_prefix_match(e, int64_t(query.size()));
    CHECK(e.blocks.empty());
    CHECK(m.ref_count(held[0]) == 2);
    CHECK(m.prefix_cache_stats().queries == 111);
    CHECK(m.prefix_cache_stats().hits == 64);

    CHECK_THROWS_AS(m.match_prefix(query, b), std::logic_error);  // b is not empty
    free_all(m, {&b, &c});
}

TEST_CASE("block manager: match never covers all tokens") {
    BlockManager m(8, 16);
    const auto prompt = iota_tokens(48);
    BlockList a = prefill(m, prompt);
    m.free(a);
    BlockList b;
    CHECK(m.match_prefix(std::span(prompt).first(32), b) == 16);  // the last token must be computed
    m.free(b);
    CHECK(m.match_prefix(std::span(prompt).first(33), b) == 32);
    m.free(b);
    CHECK(m.match_prefix(std::span(prompt).first(16), b) == 0);
    CHECK(m.match_prefix(std::span(prompt).first(0), b) == 0);
    CHECK(m.match_prefix(prompt, b) == 32);
    free_all(m, {&b});
}

TEST_CASE("block manager: a hash hit with other tokens, or another parent, is not a hit") {
    BlockManager m(8, 4, true, constant_hash);
    const std::vector<int32_t> t = {1, 2, 3, 4};
    BlockList a = prefill(m, t);  // one block, cached under 42
    m.free(a);
    BlockList b;
    CHECK(m.match_prefix(std::vector<int32_t>{1, 2, 3, 5, 9}, b) == 0);  // same hash, other tokens
    CHECK(b.blocks.empty());
    CHECK(m.match_prefix(std::vector<int32_t>{1, 2, 3, 4, 9}, b) == 4);
    m.free(b);
    // [t, t]: the second block's hash is 42 again, but the cached block under it has another parent.
    const auto tt = concat(t, t);
    CHECK(m.match_prefix(concat(tt, {9}), b) == 4);
    m.free(b);
    m.check_invariants();

    // With the real hash, a different block simply misses.
    BlockManager r(8, 4);
    BlockList c = prefill(r, t);
    r.free(c);
    CHECK(r.match_prefix(std::vector<int32_t>{1, 2, 3, 5, 9}, c) == 0);
}

TEST_CASE("block manager: plain free blocks go first, then the least recently released cached block") {
    BlockManager m(4, 2);
    const std::vector<int32_t> ta = {1, 1}, tb = {2, 2}, tc = {3, 3};
    BlockList a = prefill(m, ta), b = prefill(m, tb), c = prefill(m, tc);
    const int32_t block_a = a.blocks[0], block_b = b.blocks[0], block_c = c.blocks[0];
    m.free(a);
    m.free(b);
    m.free(c);  // release order: a, b, c
    CHECK(m.num_free_blocks() == 4);

    auto cached = [&](const std::vector<int32_t>& t) {
        BlockList probe;
        const int32_t covered = m.match_prefix(concat(t, {0}), probe);
        m.free(probe);  // a hit counts as use: releasing it again refreshes its recency
        return covered > 0;
    };
    std::vector<BlockCopy> copies;
    BlockList x;
    REQUIRE(m.allocate(x, 0, 2, copies));  // the one never-used block, not a cached one
    CHECK(x.blocks[0] != block_a);
    CHECK(x.blocks[0] != block_b);
    CHECK(x.blocks[0] != block_c);

    BlockList y;
    REQUIRE(m.allocate(y, 0, 2, copies));  // evicts a, the least recently released
    CHECK(y.blocks[0] == block_a);
    CHECK_FALSE(cached(ta));

    CHECK(cached(tb));  // b is now more recent than c
    BlockList z;
    REQUIRE(m.allocate(z, 0, 2, copies));
    CHECK(z.blocks[0] == block_c);
    CHECK_FALSE(cached(tc));
    CHECK(cached(tb));
    CHECK(m.num_free_blocks() == 1);
    free_all(m, {&x, &y, &z});
}

TEST_CASE("block manager: a freed prefix is evicted from its tail, keeping its head usable") {
    BlockManager m(4, 2);
    const auto t = iota_tokens(6);
    BlockList a = prefill(m, t);  // three committed blocks
    const std::vector<int32_t> held = a.blocks;
    m.free(a);
    BlockList x;
    std::vector<BlockCopy> copies;
    REQUIRE(m.allocate(x, 0, 4, copies));  // the never-used block, then one eviction
    CHECK(std::find(x.blocks.begin(), x.blocks.end(), held[2]) != x.blocks.end());
    BlockList probe;
    CHECK(m.match_prefix(concat(t, {0}), probe) == 4);
    CHECK(probe.blocks == std::vector<int32_t>{held[0], held[1]});
    free_all(m, {&probe, &x});
}

TEST_CASE("block manager: copy-on-write after fork") {
    BlockManager m(8, 4);
    const auto t = iota_tokens(6);
    BlockList a = prefill(m, t);  // block 0 full and committed, block 1 holds 2 tokens
    const int32_t full = a.blocks[0], partial = a.blocks[1];
    BlockList b = m.fork(a);
    CHECK(b.blocks == a.blocks);
    CHECK(b.hashes == a.hashes);
    CHECK(m.ref_count(full) == 2);
    CHECK(m.ref_count(partial) == 2);
    CHECK(m.num_free_blocks() == 6);

    // a writes token 6 into the shared partial block: it gets a copy.
    std::vector<BlockCopy> copies;
    CHECK(m.blocks_needed(a, 6, 7) == 1);
    REQUIRE(m.allocate(a, 6, 7, copies));
    REQUIRE(copies.size() == 1);
    CHECK(copies[0].src == partial);
    CHECK(copies[0].dst == a.blocks[1]);
    CHECK(a.blocks[1] != partial);
    CHECK(a.blocks[0] == full);
    CHECK(m.ref_count(partial) == 1);
    CHECK(m.ref_count(a.blocks[1]) == 1);
    CHECK(m.ref_count(full) == 2);
    CHECK(m.num_free_blocks() == 5);

    // b, now the last holder of the partial block, writes in place.
    copies.clear();
    CHECK(m.blocks_needed(b, 6, 7) == 0);
    REQUIRE(m.allocate(b, 6, 7, copies));
    CHECK(copies.empty());
    CHECK(b.blocks[1] == partial);

    // A write that spans a shared block and a new one: one copy, one new block.
    BlockList c = m.fork(b);
    copies.clear();
    CHECK(m.blocks_needed(c, 7, 10) == 2);
    REQUIRE(m.allocate(c, 7, 10, copies));
    REQUIRE(copies.size() == 1);
    CHECK(copies[0].src == partial);
    CHECK(c.blocks.size() == 3);
    CHECK(m.num_free_blocks() == 3);
    free_all(m, {&a, &b, &c});
}

TEST_CASE("block manager: allocate is all or nothing") {
    BlockManager m(3, 4);
    const auto t = iota_tokens(6);
    auto [a, b] = prefill_and_fork(m, t);
    CHECK(m.num_free_blocks() == 1);
    // b writes tokens 6..9: a copy of the shared partial block plus one new block, but only one is free.
    CHECK(m.blocks_needed(b, 6, 10) == 2);
    const BlockList before = b;
    std::vector<BlockCopy> copies = {{7, 7}};
    CHECK_FALSE(m.allocate(b, 6, 10, copies));
    CHECK(b.blocks == before.blocks);
    CHECK(b.hashes == before.hashes);
    CHECK(copies.size() == 1);
    CHECK(m.ref_count(a.blocks[1]) == 2);
    CHECK(m.num_free_blocks() == 1);
    m.check_invariants();
    CHECK(m.allocate(b, 6, 8, copies));  // one copy fits
    CHECK(copies.size() == 2);
    CHECK(m.num_free_blocks() == 0);
    free_all(m, {&a, &b});
}

TEST_CASE("block manager: truncate releases blocks and uncommits the block written again") {
    BlockManager m(8, 4);
    const auto t = iota_tokens(12);
    BlockList a = prefill(m, t);  // three committed blocks
    REQUIRE(a.hashes.size() == 3);
    const std::vector<int32_t> held = a.blocks;

    m.truncate(a, 8);  // a block boundary: both kept blocks stay committed
    CHECK(a.blocks == std::vector<int32_t>{held[0], held[1]});
    CHECK(a.hashes.size() == 2);
    CHECK(m.ref_count(held[2]) == 0);
    CHECK(m.num_free_blocks() == 6);
    m.check_invariants();

    m.truncate(a, 6);  // token 6 lives in held[1], which will be written again
    CHECK(a.blocks.size() == 2);
    CHECK(a.hashes.size() == 1);
    m.check_invariants();
    BlockList probe;
    CHECK(m.match_prefix(t, probe) == 4);  // held[1]'s old tokens are no longer found
    CHECK(probe.blocks == std::vector<int32_t>{held[0]});
    m.free(probe);

    // Rewrite tokens 6, 7 and commit: the new content is found, in the same block.
    auto t2 = t;
    t2.resize(8);
    t2[6] = -1;
    t2[7] = -2;
    std::vector<BlockCopy> copies;
    REQUIRE(m.allocate(a, 6, 8, copies));
    CHECK(copies.empty());
    CHECK(a.blocks[1] == held[1]);
    m.commit(a, t2, 8);
    CHECK(a.hashes.size() == 2);
    CHECK(m.match_prefix(concat(t2, {0}), probe) == 8);
    m.free(probe);
    m.free(a);
    CHECK(m.num_free_blocks() == 8);
    m.check_invariants();

    CHECK_THROWS_AS(m.truncate(a, 1), std::invalid_argument);  // more than the list holds
}

TEST_CASE("block manager: truncate into a shared committed block leaves it to copy-on-write") {
    BlockManager m(8, 4);
    const auto t = iota_tokens(9);
    auto [a, b] = prefill_and_fork(m, t);  // blocks 0, 1 committed
    const int32_t shared = a.blocks[1];
    m.truncate(a, 6);
    CHECK(a.hashes.size() == 1);
    CHECK(a.blocks.size() == 2);
    m.check_invariants();
    BlockList probe;
    CHECK(m.match_prefix(t, probe) == 8);  // b still holds it, unchanged: still cached
    m.free(probe);

    std::vector<BlockCopy> copies;
    REQUIRE(m.allocate(a, 6, 7, copies));
    REQUIRE(copies.size() == 1);
    CHECK(copies[0].src == shared);
    CHECK(a.blocks[1] != shared);

    // Committed, held by one list only, and written: allocate uncommits it.
    BlockList c = prefill(m, t);  // the same tokens: c's blocks stay uncommitted, the cache keeps b's
    m.free(c);
    m.truncate(b, 6);  // b alone holds `shared`: uncommitted here already
    CHECK(m.match_prefix(t, probe) == 4);
    free_all(m, {&probe, &a, &b});
}

TEST_CASE("block manager: a block written while committed and held alone is uncommitted by allocate") {
    BlockManager m(8, 4);
    const auto t = iota_tokens(9);
    auto [a, b] = prefill_and_fork(m, t);
    m.truncate(a, 6);  // shared: stays committed
    m.free(b);         // now a alone holds the committed block it will write
    const int32_t blk = a.blocks[1];
    std::vector<BlockCopy> copies;
    CHECK(m.blocks_needed(a, 6, 7) == 0);
    REQUIRE(m.allocate(a, 6, 7, copies));
    CHECK(copies.empty());
    CHECK(a.blocks[1] == blk);
    m.check_invariants();
    BlockList probe;
    CHECK(m.match_prefix(t, probe) == 4);
    free_all(m, {&probe, &a});
}

TEST_CASE("block manager: rewriting committed blocks takes them out of the list's hash chain") {
    BlockManager m(8, 4);
    const auto t = iota_tokens(9);
    BlockList a = prefill(m, t);  // blocks 0, 1 committed
    REQUIRE(a.hashes.size() == 2);
    std::vector<BlockCopy> copies;
    REQUIRE(m.allocate(a, 4, 9, copies));  // tokens 4.. are computed again
    CHECK(copies.empty());
    CHECK(a.hashes.size() == 1);
    m.check_invariants();
    BlockList probe;
    CHECK(m.match_prefix(t, probe) == 4);
    m.free(probe);
    auto t2 = t;
    t2[5] = -1;
    m.commit(a, t2, 9);
    CHECK(a.hashes.size() == 2);
    CHECK(m.match_prefix(t2, probe) == 8);
    free_all(m, {&probe, &a});
}

TEST_CASE("block manager: the same prefix computed twice at once keeps one cache entry") {
    BlockManager m(8, 4);
    const auto t = iota_tokens(9);
    BlockList a = prefill(m, t);
    BlockList b = prefill(m, t);  // computed concurrently, before a's blocks could be borrowed
    CHECK(a.hashes == b.hashes);
    CHECK(a.blocks != b.blocks);
    CHECK(m.num_free_blocks() == 2);
    m.check_invariants();

    m.free(b);  // b's blocks are not the cache's: they become plain free blocks
    CHECK(m.num_free_blocks() == 5);
    m.check_invariants();
    BlockList c;
    CHECK(m.match_prefix(t, c) == 8);
    CHECK(std::equal(c.blocks.begin(), c.blocks.end(), a.blocks.begin()));
    m.free(c);

    // The other order: the cache's holder goes first, the duplicate later.
    BlockList d = prefill(m, t);
    m.free(a);
    m.check_invariants();
    CHECK(m.match_prefix(t, c) == 8);
    CHECK(std::find(d.blocks.begin(), d.blocks.end(), c.blocks[0]) == d.blocks.end());
    m.free(c);
    m.free(d);
    CHECK(m.num_free_blocks() == 8);
    m.check_invariants();

    // The pool can use every block: the duplicates were not leaked.
    BlockList big;
    std::vector<BlockCopy> copies;
    CHECK(m.allocate(big, 0, 32, copies));
    free_all(m, {&big});
}

TEST_CASE("block manager: prefix caching off") {
    BlockManager m(4, 4, false);
    const auto t = iota_tokens(9);
    BlockList a = prefill(m, t);
    CHECK(a.hashes.empty());
    m.free(a);
    BlockList b;
    CHECK(m.match_prefix(t, b) == 0);
    CHECK(b.blocks.empty());
    CHECK(m.prefix_cache_stats().queries == 0);
    CHECK(m.prefix_cache_stats().hits == 0);
    CHECK(m.num_free_blocks() == 4);
    m.check_invariants();
}

TEST_CASE("block manager: misuse throws instead of corrupting the pool") {
    BlockManager m(4, 4);
    BlockList bogus{{7}, {}};
    CHECK_THROWS_AS(m.free(bogus), std::logic_error);
    BlockList never{{1}, {}};  // a block nobody holds
    CHECK_THROWS_AS(m.free(never), std::logic_error);
    CHECK_THROWS_AS(m.fork(never), std::logic_error);
    BlockList a;
    std::vector<BlockCopy> copies;
    CHECK_THROWS_AS(m.allocate(a, 5, 4, copies), std::invalid_argument);
    CHECK_THROWS_AS(m.allocate(a, 4, 8, copies), std::logic_error);  // computed tokens with no blocks
    REQUIRE(m.allocate(a, 0, 4, copies));
    BlockList copy = a;
    m.free(a);
    CHECK_THROWS_AS(m.free(copy), std::logic_error);  // a second free of the same reference
    CHECK(m.num_free_blocks() == 4);
    m.check_invariants();
}
