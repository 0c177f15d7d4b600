#include "engine/grammar/mask_cache.h"

#include <algorithm>

namespace minfer::grammar {

namespace {

// The rest of a position and every rule it reaches, as text: rules numbered
// in the order they are first met, classes by their ranges. Two positions
// with the same text allow the same tokens.
std::string rest_key(const Grammar& g, const Sequence& rest) {
    std::string key;
    std::unordered_map<int32_t, int32_t> number;
    std::vector<int32_t> order;
    auto symbol = [&](const Symbol& s) {
        if (s.kind == Symbol::Kind::Char) {
            key += 'c';
            for (const auto& [lo, hi] : g.classes[size_t(s.index)].ranges) key += std::to_string(lo) + '-' + std::to_string(hi) + ',';
        } else {
            auto [it, added] = number.emplace(s.index, int32_t(order.size()));
            if (added) order.push_back(s.index);
            key += 'r' + std::to_string(it->second);
        }
        key += ';';
    };
    for (const Symbol& s : rest) symbol(s);
    for (size_t i = 0; i < order.size(); ++i) {
        key += '|';
        for (const Sequence& alt : g.rules[size_t(order[i])].alternatives) {
            for (const Symbol& s : alt) symbol(s);
            key += '/';
        }
    }
    return key;
}

}  // namespace

std::vector<Recognizer::Position> single_uses(const Grammar& g) {
    std::vector<Recognizer::Position> use(g.rules.size(), {-1, -1, -1});
    std::vector<int> count(g.rules.size(), 0);
    for (int32_t r = 0; r < int32_t(g.rules.size()); ++r)
        for (int32_t a = 0; a < int32_t(g.rules[size_t(r)].alternatives.size()); ++a)
            for (int32_t d = 0; d < int32_t(g.rules[size_t(r)].alternatives[size_t(a)].size()); ++d) {
                const Symbol& s = g.rules[size_t(r)].alternatives[size_t(a)][size_t(d)];
                if (s.kind == Symbol::Kind::Rule && count[size_t(s.index)]++ == 0) use[size_t(s.index)] = {r, a, d};
            }
    for (size_t r = 0; r < g.rules.size(); ++r)
        if (count[r] != 1 || int32_t(r) == g.root) use[r] = {-1, -1, -1};
    return use;
}

Sequence rest_in_context(const Grammar& g, const Recognizer::Position& p, const std::vector<Recognizer::Position>& uses) {
    const Sequence& seq = g.rules[size_t(p.rule)].alternatives[size_t(p.alt)];
    Sequence rest(seq.begin() + p.dot, seq.end());
    std::vector<bool> seen(g.rules.size(), false);
    constexpr size_t kMaxContext = 256;  // symbols: beyond, the recognizer decides (uncertain tokens)
    for (int32_t r = p.rule; uses[size_t(r)].rule >= 0 && !seen[size_t(r)];) {
        seen[size_t(r)] = true;
        const Recognizer::Position& u = uses[size_t(r)];
        const Sequence& parent = g.rules[size_t(u.rule)].alternatives[size_t(u.alt)];
        if (rest.size() + parent.size() - size_t(u.dot) > kMaxContext) break;
        rest.insert(rest.end(), parent.begin() + u.dot + 1, parent.end());
        r = u.rule;
    }
    return rest;
}

std::shared_ptr<const RestMask> MaskCache::get(const Grammar& g, const Sequence& rest_seq, const TokenTrie& trie) {
    const std::string key = rest_key(g, rest_seq);
    {
        std::lock_guard lock(mu_);
        if (auto it = by_rest_.find(key); it != by_rest_.end()) return it->second;
    }
    // The rest as a grammar of its own: a new start rule of the symbols after the dot.
    Grammar rest = g;
    rest.rules.push_back({"rest", {rest_seq}});
    rest.root = int32_t(rest.rules.size() - 1);
    Recognizer r(rest);
    Residuals dfa(rest, rest.rules.back().alternatives[0]);
    auto m = std::make_shared<RestMask>();
    trie.classify(r, dfa, m->sure, m->uncertain);
    m->any_sure = std::any_of(m->sure.begin(), m->sure.end(), [](uint32_t w) { return w != 0; });
    m->any_uncertain = std::any_of(m->uncertain.begin(), m->uncertain.end(), [](uint32_t w) { return w != 0; });
    std::lock_guard lock(mu_);
    return by_rest_.emplace(key, std::move(m)).first->second;
}

void MaskCache::warm(const Grammar& g, const TokenTrie& trie) {
    const std::vector<Recognizer::Position> uses = single_uses(g);
    for (int32_t r = 0; r < int32_t(g.rules.size()); ++r)
        for (int32_t a = 0; a < int32_t(g.rules[size_t(r)].alternatives.size()); ++a)
            for (int32_t d = 0; d < int32_t(g.rules[size_t(r)].alternatives[size_t(a)].size()); ++d) get(g, rest_in_context(g, {r, a, d}, uses), trie);
}

size_t MaskCache::size() const {
    std::lock_guard lock(mu_);
    return by_rest_.size();
}

std::shared_ptr<const RestMask> GrammarMasks::split(const Recognizer::Position& p) {
    const uint64_t id = uint64_t(uint32_t(p.rule)) << 40 | uint64_t(uint32_t(p.alt)) << 20 | uint64_t(uint32_t(p.dot));
    std::lock_guard lock(mu_);
    auto& slot = by_position_[id];
    if (!slot) {
        if (uses_.empty()) uses_ = single_uses(*grammar_);
        slot = cache_.get(*grammar_, rest_in_context(*grammar_, p, uses_), trie_);
    }
    return slot;
}

void GrammarMasks::allowed(Recognizer& r, std::vector<uint32_t>& mask) {
    if (r.mid_character()) {  // the splits start at character boundaries
        trie_.allowed(r, mask);
        return;
    }
    mask.assign((size_t(trie_.vocab_size()) + 31) / 32, 0u);
    std::vector<uint32_t> uncertain;
    for (const Recognizer::Position& p : r.positions()) {
        const std::shared_ptr<const RestMask> m = split(p);
        if (m->any_sure)
            for (size_t w = 0; w < mask.size(); ++w) mask[w] |= m->sure[w];
        if (m->any_uncertain) {
            if (uncertain.empty()) uncertain.assign(m->uncertain.size(), 0u);
            for (size_t w = 0; w < uncertain.size(); ++w) uncertain[w] |= m->uncertain[w];
        }
    }
    // The uncertain ones not allowed already, through the recognizer along the trie.
    if (!uncertain.empty()) trie_.allowed_among(r, uncertain, mask);
}

}  // namespace minfer::grammar
