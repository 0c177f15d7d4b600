#include "engine/grammar/mask_cache.h"

#include <algorithm>

namespace minfer::grammar {

namespace {

// The rest of a position and every rule it reaches, as a key: rules numbered
// in the order they are first met, classes by their ranges, in binary. Two
// positions with the same key allow the same tokens.
std::string rest_key(const Grammar& g, const Sequence& rest) {
    std::string key;
    std::unordered_map<int32_t, uint32_t> number;
    std::vector<int32_t> order;
    auto put = [&](uint32_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); };
    // Codes: a class is its ranges after a marker, a rule its number; the
    // markers are above any code point and any count of rules.
    constexpr uint32_t kClass = 0xFFFFFFF0u, kEndClass = 0xFFFFFFF1u, kAlt = 0xFFFFFFF2u, kRule = 0xFFFFFFF3u;
    auto symbol = [&](const Symbol& s) {
        if (s.kind == Symbol::Kind::Char) {
            put(kClass);
            for (const auto& [lo, hi] : g.classes[size_t(s.index)].ranges) put(lo), put(hi);
            put(kEndClass);
        } else {
            auto [it, added] = number.emplace(s.index, uint32_t(order.size()));
            if (added) order.push_back(s.index);
            put(it->second);
        }
    };
    key.reserve(16 * rest.size());
    for (const Symbol& s : rest) symbol(s);
    for (size_t i = 0; i < order.size(); ++i) {
        put(kRule);
        for (const Sequence& alt : g.rules[size_t(order[i])].alternatives) {
            for (const Symbol& s : alt) symbol(s);
            put(kAlt);
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

WordSet::WordSet(const std::vector<uint32_t>& words) {
    const size_t nonzero = size_t(std::count_if(words.begin(), words.end(), [](uint32_t w) { return w != 0; }));
    if (nonzero * 4 > words.size()) {  // a pair is two words: dense is smaller past half, and faster well before
        dense_ = words;
        return;
    }
    sparse_.reserve(nonzero);
    for (size_t i = 0; i < words.size(); ++i)
        if (words[i]) sparse_.emplace_back(uint32_t(i), words[i]);
}

WordSet::WordSet(const std::vector<uint32_t>& words, const std::vector<uint64_t>& blocks) {
    TokenTrie::Touched::each_block(blocks, words.size(), [&](size_t first, size_t end) {
        for (size_t w = first; w < end; ++w)
            if (words[w]) sparse_.emplace_back(uint32_t(w), words[w]);
    });
    if (sparse_.size() * 4 > words.size()) {
        sparse_.clear();
        dense_ = words;
    }
}

void WordSet::or_into(std::vector<uint32_t>& out) const {
    if (!dense_.empty())
        for (size_t w = 0; w < out.size(); ++w) out[w] |= dense_[w];
    for (const auto& [i, bits] : sparse_) out[i] |= bits;
}

void append_nonzero_words(const std::vector<uint32_t>& words, std::vector<std::pair<uint32_t, uint32_t>>& out) {
    for (size_t i = 0; i < words.size(); ++i)
        if (words[i]) out.emplace_back(uint32_t(i), words[i]);
}

void WordSet::append_words(std::vector<std::pair<uint32_t, uint32_t>>& out) const {
    append_nonzero_words(dense_, out);
    out.insert(out.end(), sparse_.begin(), sparse_.end());
}

RestGrammar::RestGrammar(const Grammar& g) : grammar_(g) {
    grammar_.rules.push_back({"rest", {{}}});
    grammar_.root = int32_t(grammar_.rules.size() - 1);
    nullable_ = nullable_rules(grammar_);  // no rule uses the rest: it changes no other rule's
}

const Grammar& RestGrammar::with(const Sequence& rest) {
    grammar_.rules.back().alternatives[0] = rest;
    return grammar_;
}

namespace {

// Zeroes the words of the blocks set in `blocks` (all words when null).
void clear_touched(std::vector<uint32_t>& words, const std::vector<uint64_t>* blocks) {
    if (!blocks) {
        std::fill(words.begin(), words.end(), 0u);
        return;
    }
    TokenTrie::Touched::each_block(*blocks, words.size(),
                                   [&](size_t first, size_t end) { std::fill(words.begin() + long(first), words.begin() + long(end), 0u); });
}

}  // namespace

std::shared_ptr<const RestMask> MaskCache::get(RestGrammar& g, const Sequence& rest_seq, const TokenTrie& trie) {
    const std::string key = rest_key(g.base(), rest_seq);
    {
        std::lock_guard lock(mu_);
        if (auto it = by_rest_.find(key); it != by_rest_.end()) return it->second;
    }
    // The rest as the root of the grammar: a start rule of the symbols after the dot.
    const Grammar& rest = g.with(rest_seq);
    Recognizer r(rest, g.nullable());
    Residuals dfa(rest, rest_seq, g.nullable());
    // Buffers per thread, all zero between splits: most splits set a few
    // bits, and clearing (or allocating) vocabulary-sized bitsets would cost
    // them more than their walk.
    thread_local std::vector<uint32_t> sure, uncertain;
    thread_local TokenTrie::Touched touched;
    try {
        trie.classify(r, dfa, sure, uncertain, touched);
    } catch (...) {  // leave the buffers zero for the next split
        clear_touched(sure, nullptr);
        clear_touched(uncertain, nullptr);
        throw;
    }
    auto m = std::make_shared<RestMask>(RestMask{touched.all_sure ? WordSet(sure) : WordSet(sure, touched.sure),
                                                 touched.all_uncertain ? WordSet(uncertain) : WordSet(uncertain, touched.uncertain)});
    clear_touched(sure, touched.all_sure ? nullptr : &touched.sure);
    clear_touched(uncertain, touched.all_uncertain ? nullptr : &touched.uncertain);
    std::lock_guard lock(mu_);
    return by_rest_.emplace(key, std::move(m)).first->second;
}

void MaskCache::warm(const Grammar& g, const TokenTrie& trie) {
    const std::vector<Recognizer::Position> uses = single_uses(g);
    RestGrammar rg(g);
    for (int32_t r = 0; r < int32_t(g.rules.size()); ++r)
        for (int32_t a = 0; a < int32_t(g.rules[size_t(r)].alternatives.size()); ++a)
            for (int32_t d = 0; d < int32_t(g.rules[size_t(r)].alternatives[size_t(a)].size()); ++d) get(rg, rest_in_context(g, {r, a, d}, uses), trie);
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
        if (!rest_grammar_) {
            uses_ = single_uses(*grammar_);
            rest_grammar_ = std::make_unique<RestGrammar>(*grammar_);
        }
        slot = cache_.get(*rest_grammar_, rest_in_context(*grammar_, p, uses_), trie_);
    }
    return slot;
}

void GrammarMasks::allowed(Recognizer& r, std::vector<uint32_t>& mask) {
    if (r.mid_character()) {  // the splits start at character boundaries
        trie_.allowed(r, mask);
        return;
    }
    mask.assign((size_t(trie_.vocab_size()) + 31) / 32, 0u);
    // The uncertain tokens' words by rank, from every split: usually a few
    // dozen words, merged as a list; past that, ORed into a bitset of the
    // vocabulary and read back (sorting thousands of words costs more).
    // Buffers per mask worker.
    thread_local std::vector<const WordSet*> with_uncertain;
    thread_local std::vector<std::pair<uint32_t, uint32_t>> uncertain;
    thread_local std::vector<uint32_t> dense;
    with_uncertain.clear();
    uncertain.clear();
    size_t words = 0;
    for (const Recognizer::Position& p : r.positions()) {
        // A rule predicted here (dot 0) is predicted by an item of this set
        // waiting for it, whose rest begins with the rule and goes on past its
        // end: that split holds every token this one takes, and decides the
        // ones this one leaves uncertain. Only the root has no such item.
        if (p.dot == 0 && p.rule != grammar_->root) continue;
        const std::shared_ptr<const RestMask> m = split(p);  // (kept by the cache: the pointer below stays valid)
        m->sure.or_into(mask);
        if (m->uncertain.any()) {
            with_uncertain.push_back(&m->uncertain);
            words += m->uncertain.size_in_words();
        }
    }
    constexpr size_t kMergeWords = 1024;
    if (with_uncertain.size() <= 1 || words <= kMergeWords) {
        for (const WordSet* u : with_uncertain) u->append_words(uncertain);
        if (with_uncertain.size() > 1) {  // sort by word and OR the words of one index together
            std::sort(uncertain.begin(), uncertain.end());
            size_t n = 0;
            for (size_t i = 0; i < uncertain.size(); ++i) {
                if (n > 0 && uncertain[n - 1].first == uncertain[i].first) uncertain[n - 1].second |= uncertain[i].second;
                else uncertain[n++] = uncertain[i];
            }
            uncertain.resize(n);
        }
    } else {
        dense.assign((trie_.num_ranked() + 31) / 32, 0u);
        for (const WordSet* u : with_uncertain) u->or_into(dense);
        append_nonzero_words(dense, uncertain);
    }
    // The uncertain ones not allowed already, through the recognizer along the trie.
    if (!uncertain.empty()) trie_.allowed_among(r, uncertain, mask);
}

}  // namespace minfer::grammar
