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
