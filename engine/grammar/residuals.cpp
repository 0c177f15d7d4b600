#include "engine/grammar/residuals.h"

#include <algorithm>

namespace minfer::grammar {

namespace {

// Bounds that keep a state's cost small: past them the walk asks the
// recognizer, which is exact but slow, so they only cost time.
constexpr size_t kMaxStates = 4096;
constexpr size_t kMaxResiduals = 32;      // per state
constexpr size_t kMaxLength = 256;        // symbols in a residual (deep nesting)
constexpr int kMaxDepth = 64;             // rule expansions before a class (left recursion never gets one)
constexpr int kExpandBudget = 1 << 14;    // expansion steps per state

// Symbols as integers, for keys: a class's index, or a rule's with the high bit.
uint32_t code(const Symbol& s) { return uint32_t(s.index) | (s.kind == Symbol::Kind::Rule ? 0x80000000u : 0u); }

bool less(const Sequence& a, const Sequence& b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(),
                                        [](const Symbol& x, const Symbol& y) { return code(x) < code(y); });
}

}  // namespace

Residuals::Residuals(const Grammar& g, Sequence start) : Residuals(g, std::move(start), nullable_rules(g)) {}

Residuals::Residuals(const Grammar& g, Sequence start, std::vector<bool> nullable) : g_(g), nullable_(std::move(nullable)) {
    intern({std::move(start)});
}

int32_t Residuals::intern(std::vector<Sequence> residuals) {
    std::sort(residuals.begin(), residuals.end(), less);
    residuals.erase(std::unique(residuals.begin(), residuals.end()), residuals.end());
    std::string key;
    for (const Sequence& s : residuals) {
        for (const Symbol& sym : s) {
            const uint32_t c = code(sym);
            key.append(reinterpret_cast<const char*>(&c), sizeof c);
        }
        key.append(4, '\xff');  // no symbol codes as all ones
    }
    if (auto it = ids_.find(key); it != ids_.end()) return it->second;
    if (states_.size() >= kMaxStates || residuals.size() > kMaxResiduals) return kUnknown;
    State st;
    st.residuals = std::move(residuals);
    st.ascii.fill(kNotYet);
    states_.push_back(std::move(st));
    const int32_t id = int32_t(states_.size() - 1);
    ids_.emplace(std::move(key), id);
    return id;
}

bool Residuals::expand(const Sequence& s, size_t from, int depth, std::vector<std::pair<int32_t, Sequence>>& out,
                       int& budget) const {
    if (--budget < 0 || depth > kMaxDepth) return false;
    if (from == s.size()) return true;  // the empty residual: nothing can come next through it
    const Symbol& head = s[from];
    if (head.kind == Symbol::Kind::Char) {
        out.emplace_back(head.index, Sequence(s.begin() + long(from) + 1, s.end()));
        return true;
    }
    // Each alternative in the rule's place; an empty one leaves the symbols behind it.
    for (const Sequence& alt : g_.rules[size_t(head.index)].alternatives) {
        Sequence t;
        t.reserve(alt.size() + s.size() - from - 1);
        t.insert(t.end(), alt.begin(), alt.end());
        t.insert(t.end(), s.begin() + long(from) + 1, s.end());
        if (t.size() > kMaxLength || !expand(t, 0, depth + 1, out, budget)) return false;
    }
    return true;
}

void Residuals::expand(int32_t state) {
    State& st = states_[size_t(state)];
    st.expanded = true;
    st.known = true;
    int budget = kExpandBudget;
    for (const Sequence& s : st.residuals) {
        if (std::all_of(s.begin(), s.end(), [&](const Symbol& x) { return x.kind == Symbol::Kind::Rule && nullable_[size_t(x.index)]; }))
            st.accepting = true;
        if (!expand(s, 0, 0, st.firsts, budget)) {
            st.known = false;
            st.firsts.clear();
            return;
        }
    }
    st.cuts = {128, kMaxCodePoint + 1};
    for (const auto& [cls, rest] : st.firsts)
        for (const auto& [lo, hi] : g_.classes[size_t(cls)].ranges) {
            if (lo > 128) st.cuts.push_back(lo);
            if (hi >= 128 && hi < kMaxCodePoint) st.cuts.push_back(hi + 1);
        }
    std::sort(st.cuts.begin(), st.cuts.end());
    st.cuts.erase(std::unique(st.cuts.begin(), st.cuts.end()), st.cuts.end());
    st.run_next.assign(st.cuts.size() - 1, kNotYet);
    for (size_t i = 0; i + 1 < st.cuts.size(); ++i)
        st.run_taken.push_back(std::any_of(st.firsts.begin(), st.firsts.end(),
                                           [&](const auto& f) { return g_.classes[size_t(f.first)].contains(st.cuts[i]); }));
}

size_t Residuals::run_of(const State& st, uint32_t cp) {
    return size_t(std::upper_bound(st.cuts.begin(), st.cuts.end(), cp) - st.cuts.begin()) - 1;
}

bool Residuals::known(int32_t state) {
    if (!states_[size_t(state)].expanded) expand(state);
    return states_[size_t(state)].known;
}

int32_t Residuals::step(int32_t state, uint32_t cp) {
    std::vector<Sequence> next;
    for (const auto& [cls, rest] : states_[size_t(state)].firsts)
        if (g_.classes[size_t(cls)].contains(cp)) next.push_back(rest);
    if (next.empty()) return kRefused;
    return intern(std::move(next));  // (may move states_: no reference is held)
}

int32_t Residuals::next(int32_t state, uint32_t cp) {
    if (!known(state)) return kUnknown;
    State& st = states_[size_t(state)];
    const size_t run = cp < 128 ? 0 : run_of(st, cp);
    int32_t& cached = cp < 128 ? st.ascii[cp] : st.run_next[run];
    if (cached != kNotYet) return cached;
    const int32_t to = step(state, cp);  // moves states_
    (cp < 128 ? states_[size_t(state)].ascii[cp] : states_[size_t(state)].run_next[run]) = to;
    return to;
}

bool Residuals::expects(int32_t state, uint32_t lo, uint32_t hi) {
    if (!known(state)) return true;  // (the walk asks the recognizer about unknown states first)
    const State& st = states_[size_t(state)];
    if (lo < 128) {
        for (const auto& [cls, rest] : st.firsts)
            if (g_.classes[size_t(cls)].intersects(lo, hi)) return true;
        return false;
    }
    for (size_t run = run_of(st, lo); run + 1 < st.cuts.size() && st.cuts[run] <= hi; ++run)
        if (st.run_taken[run]) return true;
    return false;
}

const CharClass& Residuals::loop(int32_t state) {
    State& st = states_[size_t(state)];
    if (st.looped || !known(state)) return st.loop_;
    st.looped = true;
    // c loops when the remainders behind the classes holding c are exactly
    // the residuals: for each residual some class behind which it remains
    // holds c, and no class with another remainder does.
    std::vector<CharClass> per_residual(st.residuals.size());
    CharClass others;
    for (const auto& [cls, rest] : st.firsts) {
        const auto it = std::lower_bound(st.residuals.begin(), st.residuals.end(), rest, less);
        auto& into = it != st.residuals.end() && *it == rest ? per_residual[size_t(it - st.residuals.begin())].ranges : others.ranges;
        into.insert(into.end(), g_.classes[size_t(cls)].ranges.begin(), g_.classes[size_t(cls)].ranges.end());
    }
    // The intersection of the residuals' classes less the others: the
    // complement of the union of their complements and the others.
    CharClass none = others;
    for (CharClass& c : per_residual) {
        if (c.ranges.empty()) return st.loop_;
        c.normalize(/*negate=*/true);
        none.ranges.insert(none.ranges.end(), c.ranges.begin(), c.ranges.end());
    }
    none.normalize(/*negate=*/true);
    st.loop_ = std::move(none);
    return st.loop_;
}

}  // namespace minfer::grammar

namespace minfer::grammar {

namespace {

// Every code point of c is in k.
bool covers(const CharClass& k, const CharClass& c) {
    return std::all_of(c.ranges.begin(), c.ranges.end(), [&](const auto& r) {
        const auto it = std::upper_bound(k.ranges.begin(), k.ranges.end(), std::pair<uint32_t, uint32_t>{r.first, kMaxCodePoint + 1});
        return it != k.ranges.begin() && std::prev(it)->first <= r.first && r.second <= std::prev(it)->second;
    });
}

bool overlaps(const CharClass& k, const CharClass& c) {
    return std::any_of(c.ranges.begin(), c.ranges.end(), [&](const auto& r) { return k.intersects(r.first, r.second); });
}

}  // namespace

int32_t Residuals::next_on(int32_t state, const CharClass& c) {
    if (!known(state)) return kUnknown;
    std::vector<Sequence> next;
    for (const auto& [cls, rest] : states_[size_t(state)].firsts) {
        const CharClass& k = g_.classes[size_t(cls)];
        if (covers(k, c)) next.push_back(rest);
        else if (overlaps(k, c)) return kUnknown;
    }
    if (next.empty()) return kRefused;
    return intern(std::move(next));
}

const CharClass& Residuals::drain(int32_t state) {
    if (states_[size_t(state)].drained || !known(state)) return states_[size_t(state)].drain_;
    states_[size_t(state)].drained = true;
    if (!loop(state).ranges.empty()) {
        states_[size_t(state)].drain_ = states_[size_t(state)].loop_;
        return states_[size_t(state)].drain_;
    }
    // The candidate path follows the state most printable ASCII characters
    // lead to, while that is at least half of them (a string's characters:
    // the chains worth finding are those of large classes, and a number's
    // digits would only cost states); next_on then checks that all of C take
    // each step.
    constexpr int kMaxChain = 64;
    std::vector<int32_t> chain{state};
    for (int i = 0; i < kMaxChain; ++i) {
        std::unordered_map<int32_t, int> votes;
        int32_t best = kRefused;
        for (uint32_t c = 0x20; c < 0x7F; ++c) {
            const int32_t to = next(chain.back(), c);
            if (to < 0) continue;
            const int n = ++votes[to];
            if (best < 0 || n > votes[best]) best = to;
        }
        if (best < 0 || votes[best] < 48 || std::find(chain.begin(), chain.end(), best) != chain.end()) break;
        chain.push_back(best);
        if (loop(best).ranges.empty()) continue;
        const CharClass c = states_[size_t(best)].loop_;  // a copy: next_on may add states
        for (size_t j = 0; j + 1 < chain.size(); ++j)
            if (next_on(chain[j], c) != chain[j + 1]) return states_[size_t(state)].drain_;
        states_[size_t(state)].drain_ = c;
        break;
    }
    return states_[size_t(state)].drain_;
}

}  // namespace minfer::grammar
