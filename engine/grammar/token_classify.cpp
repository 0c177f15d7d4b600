// TokenTrie::classify with residual states (residuals.h): the walk that
// computes the mask cache's splits. The plain walk (token_mask.cpp) feeds the
// recognizer at every trie node; this one looks the next state up in a table,
// and where a state loops over a class (inside a JSON string) it sets the
// tokens made of the class's characters from a precomputed pass over the
// vocabulary and walks only the others (those with a quote, a backslash, a
// character the class lacks). The recognizer walks only below a state past
// the residuals' bounds.
#include <algorithm>

#include "engine/grammar/token_mask.h"

namespace minfer::grammar {

struct TokenTrie::FastWalk {
    Residuals& dfa;
    Recognizer& r;
    std::vector<uint32_t>& sure;
    std::vector<uint32_t>& uncertain;
    Touched& touched;
    std::string path;   // the bytes from the root to the node being walked
    size_t synced = 0;  // how many of them the recognizer has been fed (a prefix)
    std::vector<std::pair<bool, const Spans*>> loops;  // per state: looked up, and its loop's spans (null if none)

    void take(const TokenTrie& trie, const Node& n) {  // the tokens that end at n are sure
        trie.set_tokens(n, sure);
        for (uint32_t t = n.first_token; t < n.first_token + n.num_tokens; ++t) Touched::mark(touched.sure, size_t(trie.tokens_[t]) / 32);
    }
    void take(int32_t id) {
        sure[size_t(id) / 32] |= 1u << (id % 32);
        Touched::mark(touched.sure, size_t(id) / 32);
    }
    void leave(const Node& n) {  // the tokens at and below n are uncertain
        set_subtree(n, uncertain);
        Touched::mark_range(touched.uncertain, n.subtree_begin / 32, (size_t(n.subtree_end) + 31) / 32);
    }
};

namespace {

// The end of the last character of t outside C, scanning from the end (most
// tokens stop at once for a small class; UTF-8 finds characters backwards
// too: they begin at the bytes that do not continue one); 0 if none, n if t
// is not UTF-8 or ends with the start of a character C has none beginning so.
size_t last_outside(const uint8_t* t, size_t n, const CharClass& c, const bool (&ascii)[128]) {
    for (size_t e = n; e > 0;) {
        if (t[e - 1] < 0x80) {
            if (!ascii[t[e - 1]]) return e;
            --e;
            continue;
        }
        size_t b = e - 1;
        while (b > 0 && e - b < 4 && (t[b] & 0xC0) == 0x80) --b;
        const int need = utf8_need(t[b]), len = int(e - b);
        uint32_t bytes = 0;
        for (int i = 0; i < len; ++i) bytes |= uint32_t(t[b + size_t(i)]) << (8 * i);
        // Only the token's last character may be unfinished.
        const bool whole = need && len == need, valid = need && (whole || (len < need && e == n));
        const auto [lo, hi] = utf8_prefix_range(bytes, len, need);
        if (!valid || lo > hi || (whole ? !c.contains(lo) : !c.intersects(lo, hi)))
            return valid && whole && lo <= hi ? e : n;  // a whole character outside C, or not UTF-8
        e = b;
    }
    return 0;
}

}  // namespace

size_t TokenTrie::Spans::bad_end(const TokenTrie& trie, uint32_t rank) const {
    const uint32_t from = trie.offset_[rank];
    return last_outside(reinterpret_cast<const uint8_t*>(trie.arena_.data()) + from, trie.offset_[rank + 1] - from, cls, ascii);
}

void TokenTrie::index_tokens() {
    const CharClass any{{{0, kMaxCodePoint}}};
    bool all[128];
    std::fill(std::begin(all), std::end(all), true);
    for (size_t k = 0; k < sorted_.size(); ++k) {
        const uint8_t* t = reinterpret_cast<const uint8_t*>(arena_.data()) + offset_[k];
        const size_t n = offset_[k + 1] - offset_[k];
        TokenChars f;
        for (size_t i = 0; i < n; ++i)
            if (t[i] < 0x80) {
                f.ascii[t[i] / 64] |= uint64_t(1) << (t[i] % 64);
                if (i > 0) f.ascii_after_first[t[i] / 64] |= uint64_t(1) << (t[i] % 64);
            } else {
                f.non_ascii = true;
            }
        f.first_ascii = n > 0 && t[0] < 0x80;
        f.utf8 = last_outside(t, n, any, all) == 0;
        chars_.push_back(f);
    }
}

std::shared_ptr<const TokenTrie::Spans> TokenTrie::spans(const CharClass& c) const {
    std::string key;
    for (const auto& [lo, hi] : c.ranges) key += std::to_string(lo) + '-' + std::to_string(hi) + ',';
    {
        std::lock_guard lock(spans_mu_);
        if (auto it = spans_.find(key); it != spans_.end()) return it->second;
    }
    auto s = std::make_shared<Spans>();
    s->cls = c;
    uint64_t outside_ascii[2] = {0, 0};
    for (uint32_t b = 0; b < 128; ++b) {
        s->ascii[b] = c.contains(b);
        if (!s->ascii[b]) outside_ascii[b / 64] |= uint64_t(1) << (b % 64);
    }
    // A class with every code point past ASCII (a JSON string's) or none
    // (most patterns') decides a token from its index: ASCII bytes as bits,
    // and whether it is UTF-8. Others read the token.
    const bool all_non_ascii = std::any_of(c.ranges.begin(), c.ranges.end(), [](const auto& r) { return r.first <= 0x80 && r.second == kMaxCodePoint; });
    const bool no_non_ascii = !c.intersects(0x80, kMaxCodePoint);
    s->inside.assign((size_t(vocab_) + 31) / 32, 0u);
    s->inside1.assign((size_t(vocab_) + 31) / 32, 0u);
    auto in = [&](const uint64_t (&a)[2]) { return !(a[0] & outside_ascii[0]) && !(a[1] & outside_ascii[1]); };
    for (uint32_t k = 0; k < uint32_t(sorted_.size()); ++k) {
        const TokenChars& f = chars_[k];
        bool inside, inside1;
        if (all_non_ascii || no_non_ascii || !f.non_ascii) {
            const bool rest_ok = !f.non_ascii || (all_non_ascii && f.utf8);
            inside = rest_ok && in(f.ascii);
            // Past an ASCII first byte, the rest; a token of one byte ends at depth 1.
            inside1 = inside || offset_[k + 1] - offset_[k] <= 1 || (f.first_ascii && rest_ok && in(f.ascii_after_first));
        } else {
            const size_t bad = s->bad_end(*this, k);
            inside = bad == 0, inside1 = bad <= 1;
        }
        const int32_t id = sorted_[k];
        if (inside)
            s->inside[size_t(id) / 32] |= 1u << (id % 32);
        else
            s->outside.push_back(k);
        if (inside1)
            s->inside1[size_t(id) / 32] |= 1u << (id % 32);
        else
            s->outside1.push_back(k);
    }
    std::lock_guard lock(spans_mu_);
    return spans_.emplace(key, std::move(s)).first->second;
}

// classify_walk's twin: `state` is the residual state after the path's whole
// characters, pending_len bytes of an unfinished one (of `need`) follow. The
// byte checks are the recognizer's (Recognizer::feed), asked of the state.
void TokenTrie::classify_fast(uint32_t node, int32_t state, uint32_t pending, int pending_len, int need, bool ended,
                              const uint32_t* lo, const uint32_t* hi, FastWalk& w) const {
    const bool known = w.dfa.known(state);
    // At the root (a walk of the whole vocabulary) a state that drains into
    // a loop counts too; below, a loop only (drain() costs more than a node).
    if (known && pending_len == 0 && !lo)
        if (const Spans* loop = node == 0 ? drain_spans(state, w) : loop_spans(state, w)) return classify_loop(node, state, ended, *loop, w);
    const std::vector<bool> done = node == 0 && known && !lo ? classify_root_loops(state, w) : std::vector<bool>();
    enum { kTake, kRefuse, kAsk } what;
    const Node& n = nodes_[node];
    const uint32_t last = n.first_child + n.num_children;
    for (uint32_t c = n.first_child; c < last && (!lo || lo != hi); ++c) {
        if (lo && (c = child_holding(c, last, *lo)) == last) break;
        const Node& child = nodes_[c];
        if (!done.empty() && done[c - n.first_child]) continue;
        const uint32_t* end = lo;
        if (lo) {  // the wanted ranks below this child
            while (lo != hi && *lo < child.subtree_begin) ++lo;
            end = lo;
            while (end != hi && *end < child.subtree_end) ++end;
            if (end == lo) continue;
        }
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
            const auto [clo, chi] = utf8_prefix_range(b, 1, nneed);
            what = nneed && clo <= chi && w.dfa.expects(state, clo, chi) ? kTake : kRefuse;
            bytes = b, len = 1;
        } else if ((b & 0xC0) != 0x80) {
            what = kRefuse;
        } else {
            bytes = pending | uint32_t(b) << (8 * pending_len), len = pending_len + 1, nneed = need;
            const auto [clo, chi] = utf8_prefix_range(bytes, len, need);
            if (clo > chi) {
                what = kRefuse;
            } else if (len < need) {
                what = w.dfa.expects(state, clo, chi) ? kTake : kRefuse;
            } else {  // the whole character: clo == chi
                to = w.dfa.next(state, clo);
                what = to == Residuals::kRefused ? kRefuse : to == Residuals::kUnknown ? kAsk : kTake;
                len = 0;
            }
        }
        if (what == kRefuse) {
            if (ended) w.leave(child);  // the rest could have ended earlier on this path
        } else if (what == kTake) {
            w.take(*this, child);
            w.path.push_back(char(b));
            classify_fast(c, to, bytes, len, nneed, ended || (len == 0 && w.dfa.accepting(to)), lo, end, w);
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
                w.take(*this, child);
                w.touched.all_sure = w.touched.all_uncertain = true;  // (the recognizer's walk writes anywhere)
                classify_walk(c, ended || w.r.accepting(), w.r, w.sure, w.uncertain);
                w.r.rollback(1);
            } else if (ended) {
                w.leave(child);
            }
        }
        if (lo) lo = end;
    }
}

namespace {

// Whether a loop over c is worth its spans: a pass over the whole vocabulary
// the first time a class comes up, repaid only when a large share of the
// tokens are made of its characters (a string's). Over a small class (a
// number's digits, a pattern's few letters) the walk refuses most tokens at
// their first byte anyway.
bool worth_spans(const CharClass& c) {
    if (c.intersects(0x80, kMaxCodePoint)) return true;
    int printable = 0;
    for (const auto& [lo, hi] : c.ranges)
        if (lo <= 0x7E && hi >= 0x20) printable += int(std::min<uint32_t>(hi, 0x7E) - std::max<uint32_t>(lo, 0x20) + 1);
    return printable >= 48;
}

}  // namespace

const TokenTrie::Spans* TokenTrie::loop_spans(int32_t state, FastWalk& w) const {
    if (size_t(state) >= w.loops.size()) w.loops.resize(size_t(state) + 1, {false, nullptr});
    auto& [looked, loop] = w.loops[size_t(state)];
    if (!looked) {
        const CharClass& c = w.dfa.loop(state);
        looked = true;
        loop = worth_spans(c) ? spans(c).get() : nullptr;  // (the trie keeps spans for good)
    }
    return loop;
}

const TokenTrie::Spans* TokenTrie::drain_spans(int32_t state, FastWalk& w) const {
    const CharClass& c = w.dfa.drain(state);
    return worth_spans(c) ? spans(c).get() : nullptr;
}

// The root's children after whose first character the state loops over one
// class (or drains into a loop), when they hold most of the vocabulary (a
// property name kept apart from the named ones by its first character, then
// any string): the tokens whose characters after the first are the class's
// are set with one bitset, and the walk goes on for the others only. Says
// which children it took.
std::vector<bool> TokenTrie::classify_root_loops(int32_t state, FastWalk& w) const {
    const Node& root = nodes_[0];
    std::vector<bool> done(root.num_children, false);
    std::vector<int32_t> after(root.num_children, Residuals::kRefused);  // the state past each child's first character
    // First the table lookups alone: unless the children the state takes
    // (or may, past ASCII) hold half the vocabulary, no loop can cover it,
    // and the drains (which explore states) are not looked for (a number's
    // position: most first bytes are refused).
    size_t reachable = 0;
    for (uint32_t i = 0; i < root.num_children; ++i) {
        const Node& child = nodes_[root.first_child + i];
        if (child.byte < 0x80 && (after[i] = w.dfa.next(state, child.byte)) < 0) continue;
        reachable += child.subtree_end - child.subtree_begin;
    }
    if (reachable * 2 < sorted_.size()) return {};
    const Spans* s = nullptr;
    size_t covered = 0;
    for (uint32_t i = 0; i < root.num_children; ++i) {
        const Node& child = nodes_[root.first_child + i];
        if (child.byte >= 0x80) continue;
        const int32_t to = after[i];
        const Spans* loop = to >= 0 ? drain_spans(to, w) : nullptr;
        if (!loop || (s && loop != s)) continue;
        s = loop;
        done[i] = true;
        covered += child.subtree_end - child.subtree_begin;
    }
    // A lead byte whose characters all take the state to one that drains
    // into the same loop (any character of a property name but the named
    // ones' first): its tokens are decided by their bytes after the first
    // character alike.
    for (uint32_t i = 0; s && i < root.num_children; ++i) {
        const Node& child = nodes_[root.first_child + i];
        const int need = child.byte >= 0xC0 ? utf8_need(child.byte) : 0;
        if (!need) continue;
        const auto [lo, hi] = utf8_prefix_range(child.byte, 1, need);
        const int32_t to = lo <= hi ? w.dfa.next_on(state, CharClass{{{lo, hi}}}) : Residuals::kRefused;
        if (to < 0 || drain_spans(to, w) != s) continue;
        done[i] = true;
        after[i] = to;
        covered += child.subtree_end - child.subtree_begin;
    }
    if (!s || covered * 2 < sorted_.size()) return {};
    std::vector<uint32_t> taken = s->inside1;
    for (uint32_t i = 0; i < root.num_children; ++i) {
        if (done[i]) continue;
        const Node& child = nodes_[root.first_child + i];
        for (uint32_t k = child.subtree_begin; k < child.subtree_end; ++k) taken[size_t(sorted_[k]) / 32] &= ~(1u << (sorted_[k] % 32));
    }
    for (size_t i = 0; i < taken.size(); ++i) w.sure[i] |= taken[i];
    w.touched.all_sure = true;
    const uint32_t *lo = s->outside1.data(), *hi = lo + s->outside1.size();
    for (uint32_t i = 0; i < root.num_children; ++i) {
        if (!done[i]) continue;
        const Node& child = nodes_[root.first_child + i];
        while (lo != hi && *lo < child.subtree_begin) ++lo;
        const uint32_t* end = lo;
        while (end != hi && *end < child.subtree_end) ++end;
        if (end != lo) {
            w.path.push_back(char(child.byte));
            if (child.byte < 0x80)
                classify_fast(root.first_child + i, after[i], 0, 0, 0, w.dfa.accepting(after[i]), lo, end, w);
            else  // the first character unfinished: the walk goes on from the state before it
                classify_fast(root.first_child + i, state, child.byte, 1, utf8_need(child.byte), false, lo, end, w);
            w.path.pop_back();
            if (w.synced > 0) {
                w.r.rollback(w.synced);
                w.synced = 0;
            }
        }
        lo = end;
    }
    return done;
}

// A state that loops over C at a character boundary, or drains into such a
// loop (Residuals::drain): every token below whose bytes from here are C's
// characters is taken whole, so it is sure; the walk goes on for the others
// only. (Nodes it visits below are not looked up again: their subtrees hold
// only wanted tokens.)
void TokenTrie::classify_loop(uint32_t node, int32_t state, bool ended, const Spans& s, FastWalk& w) const {
    std::vector<uint32_t> wanted;
    if (node == 0) {
        for (size_t i = 0; i < w.sure.size(); ++i) w.sure[i] |= s.inside[i];
        w.touched.all_sure = true;
        wanted = s.outside;
    } else {
        const size_t depth = w.path.size();
        const Node& n = nodes_[node];
        for (uint32_t k = n.subtree_begin; k < n.subtree_end; ++k)
            if ((s.inside[size_t(sorted_[k]) / 32] >> (sorted_[k] % 32) & 1u) || s.bad_end(*this, k) <= depth)
                w.take(sorted_[k]);
            else
                wanted.push_back(k);
    }
    if (!wanted.empty()) classify_fast(node, state, 0, 0, 0, ended, wanted.data(), wanted.data() + wanted.size(), w);
}

void TokenTrie::classify(Recognizer& rest, Residuals& dfa, std::vector<uint32_t>& sure, std::vector<uint32_t>& uncertain) const {
    sure.clear();
    uncertain.clear();
    Touched touched;
    classify(rest, dfa, sure, uncertain, touched);
}

void TokenTrie::classify(Recognizer& rest, Residuals& dfa, std::vector<uint32_t>& sure, std::vector<uint32_t>& uncertain,
                         Touched& touched) const {
    sure.resize((size_t(vocab_) + 31) / 32, 0u);
    uncertain.resize((sorted_.size() + 31) / 32, 0u);
    constexpr size_t kBits = Touched::kBlockWords * 64;  // words a uint64_t of blocks covers
    touched.sure.assign((sure.size() + kBits - 1) / kBits, 0);
    touched.uncertain.assign((uncertain.size() + kBits - 1) / kBits, 0);
    touched.all_sure = touched.all_uncertain = false;
    FastWalk w{dfa, rest, sure, uncertain, touched, {}, 0, {}};
    classify_fast(0, 0, 0, 0, 0, false, nullptr, nullptr, w);
    rest.rollback(w.synced);
}

}  // namespace minfer::grammar
