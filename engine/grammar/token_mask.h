// Which tokens a grammar allows next: the vocabulary as a trie of token
// bytes, walked with the recognizer.
//
// A token is allowed when the recognizer takes all of its bytes. Tokens that
// share a prefix share the walk: the trie feeds each byte once for all of
// them, and a refused byte prunes every token below it. This is the plain
// walk (a reference, and what the faster masks are checked against); its cost
// grows with the tokens that stay alive, all of them inside a JSON string.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/grammar/earley.h"
#include "engine/grammar/residuals.h"

namespace minfer::grammar {

class TokenTrie {
public:
    // bytes[id]: the token's bytes; an empty string is a token no grammar
    // allows (control tokens, unused ids).
    explicit TokenTrie(const std::vector<std::string>& bytes);

    int32_t vocab_size() const { return vocab_; }
    size_t num_nodes() const { return nodes_.size(); }
    // The tokens with bytes, ranked 0 .. num_ranked() - 1 in byte order.
    size_t num_ranked() const { return sorted_.size(); }

    // Sets bit t of mask (word t / 32) for every token the recognizer takes
    // whole, clears the others; the recognizer is left as it was. The caller
    // adds the end-of-sequence tokens when r.accepting().
    void allowed(Recognizer& r, std::vector<uint32_t>& mask) const;

    // For a recognizer of one grammar position's rest (mask_cache.h): `sure`
    // gets the tokens it takes whole (bits by id); `uncertain` the tokens it
    // refuses after it could have ended (having taken at least one byte),
    // which the rules around the position must decide (bits by rank: a
    // token's index in byte order, so that a trie subtree is a range).
    void classify(Recognizer& rest, std::vector<uint32_t>& sure, std::vector<uint32_t>& uncertain) const;
    // The same split, walked with the rest's residual states (residuals.h):
    // a trie node costs a table lookup, and the recognizer is asked only
    // below a node whose state is unknown. `dfa` must describe `rest` (its
    // start state the rest's sequence), which must not have been fed.
    // A state that loops over a class (Residuals::loop) takes every token
    // whose bytes from there are characters of the class whole: those are
    // set from spans() in one pass, and only the others are walked.
    void classify(Recognizer& rest, Residuals& dfa, std::vector<uint32_t>& sure, std::vector<uint32_t>& uncertain) const;
    // Which blocks of kBlockWords words of the two bitsets a walk set bits in
    // (all of them after a step that ORs a whole bitset in): the split of a
    // number's position sets a few bits of a 262k-token vocabulary, and is
    // read, and its buffers cleared, without a pass over every word.
    struct Touched {
        static constexpr size_t kBlockWords = 16;
        std::vector<uint64_t> sure, uncertain;  // bit b: words [b * kBlockWords, (b + 1) * kBlockWords)
        bool all_sure = false, all_uncertain = false;
        static void mark(std::vector<uint64_t>& blocks, size_t word) { blocks[word / kBlockWords / 64] |= uint64_t(1) << (word / kBlockWords % 64); }
        // Marks the blocks of words [first, end).
        static void mark_range(std::vector<uint64_t>& blocks, size_t first, size_t end) {
            for (size_t b = first / kBlockWords; b * kBlockWords < end; ++b) mark(blocks, b * kBlockWords);
        }
        // Calls f(first, end) with the words of each block marked in `blocks`, in order (end <= size).
        template <class F>
        static void each_block(const std::vector<uint64_t>& blocks, size_t size, F f) {
            for (size_t i = 0; i < blocks.size(); ++i)
                for (uint64_t bits = blocks[i]; bits; bits &= bits - 1) {
                    const size_t first = (i * 64 + size_t(std::countr_zero(bits))) * kBlockWords;
                    f(first, std::min(first + kBlockWords, size));
                }
        }
    };
    // The same into buffers that are all zero on entry (empty ones are sized),
    // noting the blocks it sets bits in.
    void classify(Recognizer& rest, Residuals& dfa, std::vector<uint32_t>& sure, std::vector<uint32_t>& uncertain,
                  Touched& touched) const;

    // Where each token leaves a class C, computed once per class (thread-safe).
    // A token's bad end is the end of its last character outside C (0: none),
    // its length if it is not UTF-8 or ends with the start of a character C
    // has none beginning so. A walk that loops over C from a character
    // boundary at depth d takes whole the tokens below whose bad end is <= d.
    struct Spans {
        CharClass cls;
        bool ascii[128];               // C's ASCII characters
        std::vector<uint32_t> inside;  // bit by id: bad end 0
        std::vector<uint32_t> outside; // the other ranks, ascending
        std::vector<uint32_t> inside1, outside1;  // the same for a bad end <= 1 (loops after a first character)
        size_t bad_end(const TokenTrie& trie, uint32_t rank) const;
    };
    std::shared_ptr<const Spans> spans(const CharClass& c) const;

    // Sets (never clears) the bits of the tokens the recognizer takes whole
    // among those whose rank bit is set in `rank_words` (the nonzero words of
    // a bitset by rank, as (word index, word)); walks only the trie paths
    // that lead to them, so a prefix they share is fed once.
    void allowed_among(Recognizer& r, std::span<const std::pair<uint32_t, uint32_t>> rank_words,
                       std::vector<uint32_t>& mask) const;

private:
    struct Node {
        uint32_t first_child = 0, num_children = 0;  // children are consecutive, sorted by byte
        uint32_t first_token = 0, num_tokens = 0;    // into tokens_: the ids that end here
        uint32_t subtree_begin = 0, subtree_end = 0; // into sorted_: the ids at and below this node
        uint8_t byte = 0;
    };
    void walk(uint32_t node, Recognizer& r, std::vector<uint32_t>& mask) const;
    void walk_among(uint32_t node, Recognizer& r, const std::vector<uint32_t>& wanted, std::vector<uint32_t>& mask) const;
    void classify_walk(uint32_t node, bool ended, Recognizer& r, std::vector<uint32_t>& sure,
                       std::vector<uint32_t>& uncertain) const;
    struct FastWalk;
    // [lo, hi): when not null, only the tokens of these ranks matter (as walk_among).
    void classify_fast(uint32_t node, int32_t state, uint32_t pending, int pending_len, int need, bool ended,
                       const uint32_t* lo, const uint32_t* hi, FastWalk& w) const;
    void classify_loop(uint32_t node, int32_t state, bool ended, const Spans& spans, FastWalk& w) const;
    std::vector<bool> classify_root_loops(int32_t state, FastWalk& w) const;
    const Spans* loop_spans(int32_t state, FastWalk& w) const;   // Residuals::loop's, cached per walk
    const Spans* drain_spans(int32_t state, FastWalk& w) const;  // Residuals::drain's
    void set_tokens(const Node& n, std::vector<uint32_t>& mask) const {
        for (uint32_t t = n.first_token; t < n.first_token + n.num_tokens; ++t) mask[size_t(tokens_[t]) / 32] |= 1u << (tokens_[t] % 32);
    }
    // A subtree's ranks are a range: whole words at a time (the subtree of a
    // refused first byte may hold a third of the vocabulary).
    static void set_subtree(const Node& n, std::vector<uint32_t>& ranks) {
        uint32_t k = n.subtree_begin;
        for (; k < n.subtree_end && k % 32; ++k) ranks[k / 32] |= 1u << (k % 32);
        for (; k + 32 <= n.subtree_end; k += 32) ranks[k / 32] = ~0u;
        for (; k < n.subtree_end; ++k) ranks[k / 32] |= 1u << (k % 32);
    }
    // The first child from c on (below last) whose subtree reaches past rank k:
    // a walk of a few wanted tokens skips there (a node may have thousands of children).
    uint32_t child_holding(uint32_t c, uint32_t last, uint32_t k) const {
        if (c == last || nodes_[c].subtree_end > k) return c;  // most often the next child
        return uint32_t(std::partition_point(nodes_.begin() + c, nodes_.begin() + last, [&](const Node& x) { return x.subtree_end <= k; }) -
                        nodes_.begin());
    }

    int32_t vocab_ = 0;
    std::vector<Node> nodes_;  // nodes_[0] is the root (the empty prefix)
    std::vector<int32_t> tokens_;
    std::vector<int32_t> sorted_;  // the ids sorted by their bytes
    std::vector<uint32_t> rank_;   // id -> its index in sorted_
    // What spans() can tell of a token without reading it: its ASCII bytes,
    // whether it has others, whether it is UTF-8 (a last character may be unfinished).
    struct TokenChars {
        uint64_t ascii[2] = {0, 0}, ascii_after_first[2] = {0, 0};
        bool first_ascii = false, non_ascii = false, utf8 = false;
    };
    void index_tokens();
    std::vector<TokenChars> chars_;  // by rank
    std::string arena_;            // the tokens' bytes in rank order
    std::vector<uint32_t> offset_; // rank -> where its bytes begin in arena_ (one more at the end)
    mutable std::mutex spans_mu_;
    mutable std::unordered_map<std::string, std::shared_ptr<const Spans>> spans_;  // by the class's ranges
};

}  // namespace minfer::grammar
