// BlockManager under random workloads: many sequences checked against a model of the K/V memory.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>
#include <span>
#include <vector>

#include "block_manager_test_util.h"
#include "kvcache/block_manager.h"

using minfer::BlockCopy;
using minfer::BlockList;
using minfer::BlockManager;
using namespace minfer::block_manager_test;

// ---- randomized: many sequences against a model of the K/V memory ------------------------

namespace {

// Few distinct values: colliding hashes, so the verification paths run often.
uint64_t weak_hash(std::span<const int32_t> tokens, uint64_t parent) {
    return (parent * 7 + uint64_t(tokens[0]) * 3 + uint64_t(tokens.back())) % 5;
}

struct Seq {
    std::vector<int32_t> tokens;  // tokens[0, num_computed) have K/V in the blocks
    int32_t num_computed = 0;
    BlockList list;
};

class Stress {
public:
    Stress(int32_t num_blocks, int32_t block_size, bool caching, minfer::BlockHashFn hash, uint32_t seed)
        : m_(num_blocks, block_size, caching, hash), hash_(hash), bs_(block_size), rng_(seed),
          kv_(num_blocks, std::vector<int32_t>(block_size, -1)) {}

    void run(int steps) {
        for (int i = 0; i < steps; ++i) {
            const int op = pick(0, 99);
            if (seqs_.empty() || op < 15) admit();
            else if (op < 55) step(seqs_[pick(0, int(seqs_.size()) - 1)]);
            else if (op < 65) fork();
            else if (op < 75) truncate();
            else if (op < 85) decode_tokens();
            else if (op < 92) release(pick(0, int(seqs_.size()) - 1));
            else probe();
            check();
        }
        while (!seqs_.empty()) {
            release(0);
            check();
        }
        CHECK(m_.num_free_blocks() == m_.num_blocks());
        CHECK(m_.usage() == 0.0);
    }

private:
    int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

    std::vector<int32_t> random_tokens(int n) {
        std::vector<int32_t> t(n);
        for (int32_t& x : t) x = pick(0, 2);
        return t;
    }

    // A few prompt prefixes shared by many sequences, then a random tail.
    std::vector<int32_t> random_prompt() {
        static const std::vector<std::vector<int32_t>> bases = {{}, {1, 2, 1, 0, 2, 2, 1, 0, 1, 1, 2, 0},
                                                                {0, 0, 0, 0, 0, 0, 0, 0}};
        const auto& base = bases[pick(0, int(bases.size()) - 1)];
        std::vector<int32_t> t(base.begin(), base.begin() + pick(0, int(base.size())));
        return concat(t, random_tokens(pick(1, 12)));
    }

    // The borrowed blocks must really hold the query's tokens.
    void check_match(const std::vector<int32_t>& query, const BlockList& list, int32_t covered) {
        REQUIRE(covered % bs_ == 0);
        REQUIRE(covered < int32_t(query.size()));
        REQUIRE(int32_t(list.blocks.size()) * bs_ == covered);
        for (int32_t p = 0; p < covered; ++p) REQUIRE(kv_[list.blocks[p / bs_]][p % bs_] == query[p]);
    }

    int32_t match(const std::vector<int32_t>& query, BlockList& list) {
        const auto before = m_.prefix_cache_stats();
        const int32_t covered = m_.match_prefix(query, list);
        check_match(query, list, covered);
        if (m_.prefix_caching()) {
            CHECK(m_.prefix_cache_stats().queries == before.queries + int64_t(query.size()));
            CHECK(m_.prefix_cache_stats().hits == before.hits + covered);
        } else {
            CHECK(covered == 0);
        }
        return covered;
    }

    void admit() {
        Seq s;
        s.tokens = random_prompt();
        s.num_computed = match(s.tokens, s.list);
        seqs_.push_back(std::move(s));
    }

    // One model step: allocate, copy, write the K/V, commit.
    void step(Seq& s) {
        const int32_t left = int32_t(s.tokens.size()) - s.num_computed;
        if (left == 0) return;
        const int32_t count = pick(1, left);
        const int32_t needed = m_.blocks_needed(s.list, s.num_computed, s.num_computed + count);
        const int32_t free_before = m_.num_free_blocks();
        std::vector<int32_t> refs_before(m_.num_blocks());
        for (int32_t b = 0; b < m_.num_blocks(); ++b) refs_before[b] = m_.ref_count(b);
        const BlockList list_before = s.list;
        std::vector<BlockCopy> copies;
        if (!m_.allocate(s.list, s.num_computed, s.num_computed + count, copies)) {
            REQUIRE(needed > free_before);  // refused only when short, and then nothing changed
            CHECK(copies.empty());
            CHECK(s.list.blocks == list_before.blocks);
            CHECK(s.list.hashes == list_before.hashes);
            CHECK(m_.num_free_blocks() == free_before);
            for (int32_t b = 0; b < m_.num_blocks(); ++b) REQUIRE(m_.ref_count(b) == refs_before[b]);
            if (pick(0, 1)) release(pick(0, int(seqs_.size()) - 1));  // preempt someone (maybe s itself)
            return;
        }
        REQUIRE(free_before - m_.num_free_blocks() == needed);  // blocks_needed is exact
        REQUIRE(int32_t(s.list.blocks.size()) * bs_ >= s.num_computed + count);
        for (const BlockCopy& c : copies) kv_[c.dst] = kv_[c.src];
        // Sometimes fewer tokens are computed than were reserved (a shorter step, speculative tokens).
        const int32_t computed = pick(0, 3) ? count : pick(1, count);
        for (int32_t p = s.num_computed; p < s.num_computed + computed; ++p)
            kv_[s.list.blocks[p / bs_]][p % bs_] = s.tokens[p];
        s.num_computed += computed;
        m_.commit(s.list, s.tokens, s.num_computed);
    }

    void fork() {
        Seq& parent = seqs_[pick(0, int(seqs_.size()) - 1)];
        Seq child;
        child.list = m_.fork(parent.list);
        child.num_computed = parent.num_computed;
        child.tokens.assign(parent.tokens.begin(), parent.tokens.begin() + parent.num_computed);
        child.tokens = concat(child.tokens, random_tokens(pick(1, 6)));
        seqs_.push_back(std::move(child));
    }

    void truncate() {
        Seq& s = seqs_[pick(0, int(seqs_.size()) - 1)];
        const int32_t n = pick(0, s.num_computed);
        m_.truncate(s.list, n);
        REQUIRE(int32_t(s.list.blocks.size()) == (n + bs_ - 1) / bs_);
        s.num_computed = n;
        s.tokens.resize(n);
        s.tokens = concat(s.tokens, random_tokens(pick(1, 8)));  // rolled back, then other tokens
    }

    void decode_tokens() {
        Seq& s = seqs_[pick(0, int(seqs_.size()) - 1)];
        s.tokens = concat(s.tokens, random_tokens(pick(1, 3)));
    }

    void release(int i) {
        m_.free(seqs_[i].list);
        CHECK(seqs_[i].list.blocks.empty());
        seqs_.erase(seqs_.begin() + i);
    }

    // A lookup that nobody keeps: whatever it finds must be verified.
    void probe() {
        std::vector<int32_t> query = seqs_.empty() ? random_prompt() : seqs_[pick(0, int(seqs_.size()) - 1)].tokens;
        if (pick(0, 1)) query = concat(query, random_tokens(1));
        BlockList list;
        match(query, list);
        m_.free(list);
    }

    void check() {
        m_.check_invariants();
        std::map<int32_t, int32_t> refs;  // block -> references from the lists
        for (const Seq& s : seqs_) {
            for (int32_t b : s.list.blocks) ++refs[b];
            // Every computed token's K/V is where the list says: nobody wrote into a block it shared.
            REQUIRE(int32_t(s.list.blocks.size()) * bs_ >= s.num_computed);
            for (int32_t p = 0; p < s.num_computed; ++p) REQUIRE(kv_[s.list.blocks[p / bs_]][p % bs_] == s.tokens[p]);
            // The hash chain covers computed full blocks and follows their tokens.
            REQUIRE(int32_t(s.list.hashes.size()) <= s.num_computed / bs_);
            uint64_t parent = minfer::kFirstBlockParent;
            for (size_t i = 0; i < s.list.hashes.size(); ++i) {
                parent = hash_(std::span(s.tokens).subspan(i * bs_, bs_), parent);
                REQUIRE(s.list.hashes[i] == parent);
            }
            if (m_.prefix_caching()) REQUIRE(int32_t(s.list.hashes.size()) == s.num_computed / bs_);
        }
        int64_t total = 0;
        for (int32_t b = 0; b < m_.num_blocks(); ++b) {
            const auto it = refs.find(b);
            REQUIRE(m_.ref_count(b) == (it == refs.end() ? 0 : it->second));
            total += m_.ref_count(b);
        }
        int64_t list_refs = 0;
        for (const Seq& s : seqs_) list_refs += int64_t(s.list.blocks.size());
        REQUIRE(total == list_refs);
        REQUIRE(m_.num_free_blocks() + int32_t(refs.size()) == m_.num_blocks());
        CHECK(m_.usage() == doctest::Approx(double(refs.size()) / m_.num_blocks()));
    }

    BlockManager m_;
    minfer::BlockHashFn hash_;
    int32_t bs_;
    std::mt19937 rng_;
    std::vector<std::vector<int32_t>> kv_;  // the K/V memory, one token per slot
    std::vector<Seq> seqs_;
};

}  // namespace

TEST_CASE("block manager: randomized sequences keep the pool consistent") {
    struct Config {
        int32_t num_blocks, block_size;
        bool caching;
        minfer::BlockHashFn hash;
    };
    const Config configs[] = {{24, 4, true, minfer::hash_block}, {16, 1, true, minfer::hash_block},
                              {12, 3, true, minfer::hash_block}, {24, 4, true, weak_hash},
                              {20, 2, true, constant_hash},      {16, 4, false, minfer::hash_block}};
    for (const Config& c : configs) {
        for (uint32_t seed = 1; seed <= 4; ++seed) {
            CAPTURE(c.num_blocks);
            CAPTURE(c.block_size);
            CAPTURE(c.caching);
            CAPTURE(seed);
            Stress(c.num_blocks, c.block_size, c.caching, c.hash, seed).run(3000);
        }
    }
}
