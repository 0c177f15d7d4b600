#include "engine/grammar/token_mask.h"

#include <algorithm>
#include <array>
#include <bit>
#include <numeric>

namespace minfer::grammar {

TokenTrie::TokenTrie(const std::vector<std::string>& bytes) : vocab_(int32_t(bytes.size())) {
    // Ids sorted by their bytes: every node's tokens and subtree are then a
    // contiguous run, built breadth-first so that children are consecutive.
    std::vector<int32_t> ids;
    for (int32_t i = 0; i < vocab_; ++i)
        if (!bytes[size_t(i)].empty()) ids.push_back(i);
    std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return bytes[size_t(a)] < bytes[size_t(b)]; });
    struct Pending {
        uint32_t node;
        size_t begin, end, depth;  // ids[begin, end) share the node's prefix of `depth` bytes
    };
    nodes_.push_back({});
    std::vector<Pending> queue{{0, 0, ids.size(), 0}};
    for (size_t q = 0; q < queue.size(); ++q) {
        const Pending p = queue[q];
        size_t i = p.begin;
        // Tokens that end here sort first (shortest).
        const uint32_t first_token = uint32_t(tokens_.size());
        while (i < p.end && bytes[size_t(ids[i])].size() == p.depth) tokens_.push_back(ids[i++]);
        nodes_[p.node].subtree_begin = uint32_t(p.begin);
        nodes_[p.node].subtree_end = uint32_t(p.end);
        nodes_[p.node].first_token = first_token;
        nodes_[p.node].num_tokens = uint32_t(tokens_.size()) - first_token;
        nodes_[p.node].first_child = uint32_t(nodes_.size());
        while (i < p.end) {
            const uint8_t b = uint8_t(bytes[size_t(ids[i])][p.depth]);
            size_t j = i;
            while (j < p.end && uint8_t(bytes[size_t(ids[j])][p.depth]) == b) ++j;
            Node child;
            child.byte = b;
            nodes_.push_back(child);
            queue.push_back({uint32_t(nodes_.size() - 1), i, j, p.depth + 1});
            ++nodes_[p.node].num_children;
            i = j;
        }
    }
    for (const int32_t id : ids) {
        offset_.push_back(uint32_t(arena_.size()));
        arena_ += bytes[size_t(id)];
    }
    offset_.push_back(uint32_t(arena_.size()));
    sorted_ = std::move(ids);
    index_tokens();
    rank_.assign(size_t(vocab_), 0);
    for (size_t i = 0; i < sorted_.size(); ++i) rank_[size_t(sorted_[i])] = uint32_t(i);
}

void TokenTrie::walk(uint32_t node, Recognizer& r, std::vector<uint32_t>& mask) const {
    const Node& n = nodes_[node];
    for (uint32_t c = n.first_child; c < n.first_child + n.num_children; ++c) {
        if (!r.feed(nodes_[c].byte)) continue;
        const Node& child = nodes_[c];
        for (uint32_t t = child.first_token; t < child.first_token + child.num_tokens; ++t)
            mask[size_t(tokens_[t]) / 32] |= 1u << (tokens_[t] % 32);
        walk(c, r, mask);
        r.rollback(1);
    }
}

void TokenTrie::allowed(Recognizer& r, std::vector<uint32_t>& mask) const {
    mask.assign((size_t(vocab_) + 31) / 32, 0u);
    walk(0, r, mask);
}

}  // namespace minfer::grammar

namespace minfer::grammar {

void TokenTrie::classify_walk(uint32_t node, bool ended, Recognizer& r, std::vector<uint32_t>& sure,
                              std::vector<uint32_t>& uncertain) const {
    const Node& n = nodes_[node];
    for (uint32_t c = n.first_child; c < n.first_child + n.num_children; ++c) {
        const Node& child = nodes_[c];
        if (!r.feed(child.byte)) {
            // The rest could have ended earlier on this path: what encloses it decides.
            if (ended) set_subtree(child, uncertain);
            continue;
        }
        for (uint32_t t = child.first_token; t < child.first_token + child.num_tokens; ++t)
            sure[size_t(tokens_[t]) / 32] |= 1u << (tokens_[t] % 32);
        classify_walk(c, ended || r.accepting(), r, sure, uncertain);
        r.rollback(1);
    }
}

void TokenTrie::classify(Recognizer& rest, std::vector<uint32_t>& sure, std::vector<uint32_t>& uncertain) const {
    sure.assign((size_t(vocab_) + 31) / 32, 0u);
    uncertain.assign((sorted_.size() + 31) / 32, 0u);
    classify_walk(0, false, rest, sure, uncertain);
}

}  // namespace minfer::grammar

namespace minfer::grammar {

namespace {

// The first set bit of `bits` at or past `from`, or `end` if none before it.
uint32_t next_bit(const std::vector<uint32_t>& bits, uint32_t from, uint32_t end) {
    if (from >= end) return end;
    size_t w = from / 32;
    uint32_t word = bits[w] & (~0u << (from % 32));
    while (!word) {
        if (++w * 32 >= end) return end;
        word = bits[w];
    }
    return std::min(uint32_t(w * 32) + uint32_t(std::countr_zero(word)), end);
}

}  // namespace

// wanted: bit by rank. The walk goes from wanted token to wanted token,
// jumping to the child that holds the next one. Below a node where it has
// fed many children, it asks the recognizer which bytes it may take at all
// and skips the others' subtrees: a step that left every token beginning
// with a space uncertain (138,000 of Gemma 3's, refused at their second
// byte) feeds a few bytes instead of thousands.
void TokenTrie::walk_among(uint32_t node, Recognizer& r, const std::vector<uint32_t>& wanted, std::vector<uint32_t>& mask) const {
    constexpr int kFeedsBeforeAsking = 8;  // next_bytes() costs about what a few feeds do
    const Node& n = nodes_[node];
    const uint32_t last = n.first_child + n.num_children;
    std::array<uint64_t, 4> next{};
    int fed = 0;
    for (uint32_t k = next_bit(wanted, n.subtree_begin, n.subtree_end), c = n.first_child; k < n.subtree_end;) {
        if ((c = child_holding(c, last, k)) == last) break;
        const Node& child = nodes_[c];
        if (k < child.subtree_begin) {  // a token that ends at this node: taken already
            k = next_bit(wanted, child.subtree_begin, n.subtree_end);
            continue;
        }
        if (++fed == kFeedsBeforeAsking) next = r.next_bytes();
        const bool may = fed < kFeedsBeforeAsking || (next[child.byte / 64] >> (child.byte % 64) & 1u);
        if (may && r.feed(child.byte)) {
            set_tokens(child, mask);
            walk_among(c, r, wanted, mask);
            r.rollback(1);
        }
        k = next_bit(wanted, child.subtree_end, n.subtree_end);
        ++c;
    }
}

void TokenTrie::allowed_among(Recognizer& r, std::span<const std::pair<uint32_t, uint32_t>> rank_words,
                              std::vector<uint32_t>& mask) const {
    thread_local std::vector<uint32_t> wanted;  // bit by rank; zero between calls (only the words set here are cleared)
    wanted.resize((sorted_.size() + 31) / 32, 0u);
    // The tokens another split allowed already are left out, unless they are
    // too many to look each up (then the walk's byte skipping is the cheaper).
    constexpr size_t kLookUpWords = 128;
    for (const auto& [w, word] : rank_words) {
        uint32_t keep = word;
        if (rank_words.size() <= kLookUpWords)
            for (uint32_t bits = word; bits; bits &= bits - 1) {
                const int32_t id = sorted_[w * 32 + uint32_t(std::countr_zero(bits))];
                if (mask[size_t(id) / 32] >> (id % 32) & 1u) keep &= ~(bits & -bits);
            }
        wanted[w] = keep;
    }
    try {
        walk_among(0, r, wanted, mask);
    } catch (...) {
        std::fill(wanted.begin(), wanted.end(), 0u);
        throw;
    }
    for (const auto& [w, word] : rank_words) wanted[w] = 0;
}

}  // namespace minfer::grammar
