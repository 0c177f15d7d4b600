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
    sorted_ = std::move(ids);
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

void TokenTrie::allowed_among(Recognizer& r, const std::vector<uint32_t>& ranks, std::vector<uint32_t>& mask) const {
    std::vector<uint32_t> wanted;  // in rank order, as the walk meets them
    for (size_t w = 0; w < ranks.size(); ++w)
        for (uint32_t bits = ranks[w]; bits; bits &= bits - 1) {
            const uint32_t k = uint32_t(w * 32) + uint32_t(__builtin_ctz(bits));
            const int32_t id = sorted_[k];
            if (!(mask[size_t(id) / 32] >> (id % 32) & 1u)) wanted.push_back(k);
        }
    walk_among(0, r, wanted.data(), wanted.data() + wanted.size(), mask);
}

}  // namespace minfer::grammar

namespace minfer::grammar {

struct TokenTrie::FastWalk {
    Residuals& dfa;
    Recognizer& r;
    std::vector<uint32_t>& sure;
    std::vector<uint32_t>& uncertain;
    std::string path;   // the bytes from the root to the node being walked
    size_t synced = 0;  // how many of them the recognizer has been fed (a prefix)
};

// classify_walk's twin: `state` is the residual state after the path's whole
// characters, pending_len bytes of an unfinished one (of `need`) follow. The
// byte checks are the recognizer's (Recognizer::feed), asked of the state.
void TokenTrie::classify_fast(uint32_t node, int32_t state, uint32_t pending, int pending_len, int need, bool ended,
                              FastWalk& w) const {
    enum { kTake, kRefuse, kAsk } what;
    const bool known = w.dfa.known(state);
    const Node& n = nodes_[node];
    for (uint32_t c = n.first_child; c < n.first_child + n.num_children; ++c) {
        const Node& child = nodes_[c];
        const uint8_t b = child.byte;
        int32_t to = state;
        uint32_t bytes = 0;
        int len = 0, nneed = 0;
        if (!known) {
            what = kAsk;
        } else if (pending_len == 0 && b < 0x80) {
            to = w.dfa.next(state, b);
            what = to == Residuals::kRefused ? kRefuse : to == Residuals::kUnknown ? kAsk : kTake;
        } else if (pending_len == 0) {  // a lead byte
            nneed = utf8_need(b);
            const auto [lo, hi] = utf8_prefix_range(b, 1, nneed);
            what = nneed && lo <= hi && w.dfa.expects(state, lo, hi) ? kTake : kRefuse;
            bytes = b, len = 1;
        } else if ((b & 0xC0) != 0x80) {
            what = kRefuse;
        } else {
            bytes = pending | uint32_t(b) << (8 * pending_len), len = pending_len + 1, nneed = need;
            const auto [lo, hi] = utf8_prefix_range(bytes, len, need);
            if (lo > hi) {
                what = kRefuse;
            } else if (len < need) {
                what = w.dfa.expects(state, lo, hi) ? kTake : kRefuse;
            } else {  // the whole character: lo == hi
                to = w.dfa.next(state, lo);
                what = to == Residuals::kRefused ? kRefuse : to == Residuals::kUnknown ? kAsk : kTake;
                len = 0;
            }
        }
        if (what == kRefuse) {
            if (ended) set_subtree(child, w.uncertain);  // the rest could have ended earlier on this path
        } else if (what == kTake) {
            set_tokens(child, w.sure);
            w.path.push_back(char(b));
            classify_fast(c, to, bytes, len, nneed, ended || (len == 0 && w.dfa.accepting(to)), w);
            w.path.pop_back();
            if (w.synced > w.path.size()) {
                w.r.rollback(w.synced - w.path.size());
                w.synced = w.path.size();
            }
        } else {
            // Past the residuals' bounds: the recognizer, brought to this node
            // (it takes the path, which the residuals took), walks the subtree.
            for (; w.synced < w.path.size(); ++w.synced) w.r.feed(uint8_t(w.path[w.synced]));
            if (w.r.feed(b)) {
                set_tokens(child, w.sure);
                classify_walk(c, ended || w.r.accepting(), w.r, w.sure, w.uncertain);
                w.r.rollback(1);
            } else if (ended) {
                set_subtree(child, w.uncertain);
            }
        }
    }
}

void TokenTrie::classify(Recognizer& rest, Residuals& dfa, std::vector<uint32_t>& sure, std::vector<uint32_t>& uncertain) const {
    sure.assign((size_t(vocab_) + 31) / 32, 0u);
    uncertain.assign((sorted_.size() + 31) / 32, 0u);
    FastWalk w{dfa, rest, sure, uncertain, {}, 0};
    classify_fast(0, 0, 0, 0, 0, false, w);
    rest.rollback(w.synced);
}

}  // namespace minfer::grammar
