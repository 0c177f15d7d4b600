#include "engine/grammar/token_mask.h"

#include <algorithm>
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
            if (ended)
                for (uint32_t k = child.subtree_begin; k < child.subtree_end; ++k) uncertain[k / 32] |= 1u << (k % 32);
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

// [lo, hi): the sorted ranks of the wanted tokens in this node's subtree.
void TokenTrie::walk_among(uint32_t node, Recognizer& r, const uint32_t* lo, const uint32_t* hi,
                           std::vector<uint32_t>& mask) const {
    const Node& n = nodes_[node];
    for (uint32_t c = n.first_child; c < n.first_child + n.num_children && lo != hi; ++c) {
        const Node& child = nodes_[c];
        while (lo != hi && *lo < child.subtree_begin) ++lo;  // tokens that end at the parent
        const uint32_t* end = lo;
        while (end != hi && *end < child.subtree_end) ++end;
        if (end == lo) continue;
        if (r.feed(child.byte)) {
            for (uint32_t t = child.first_token; t < child.first_token + child.num_tokens; ++t)
                mask[size_t(tokens_[t]) / 32] |= 1u << (tokens_[t] % 32);
            walk_among(c, r, lo, end, mask);
            r.rollback(1);
        }
        lo = end;
    }
}

void TokenTrie::allowed_among(Recognizer& r, std::span<const std::pair<uint32_t, uint32_t>> rank_words,
                              std::vector<uint32_t>& mask) const {
    std::vector<uint32_t> wanted;  // in rank order, as the walk meets them
    for (const auto& [w, word] : rank_words)
        for (uint32_t bits = word; bits; bits &= bits - 1) {
            const uint32_t k = w * 32 + uint32_t(__builtin_ctz(bits));
            const int32_t id = sorted_[k];
            if (!(mask[size_t(id) / 32] >> (id % 32) & 1u)) wanted.push_back(k);
        }
    walk_among(0, r, wanted.data(), wanted.data() + wanted.size(), mask);
}

}  // namespace minfer::grammar
