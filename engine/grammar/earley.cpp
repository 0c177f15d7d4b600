#include "engine/grammar/earley.h"

#include <algorithm>
#include <cstdint>

namespace minfer::grammar {

std::vector<bool> nullable_rules(const Grammar& g) {
    // A worklist, linear in the grammar's size: each alternative counts its
    // symbols not yet known to be nullable (a class never is), and a rule
    // found nullable lowers the count of every alternative that uses it.
    std::vector<bool> nullable(g.rules.size(), false);
    std::vector<std::pair<int32_t, int32_t>> alts;         // (rule, symbols left)
    std::vector<std::vector<int32_t>> used_in(g.rules.size());  // per rule: its uses, as indices into alts
    std::vector<int32_t> found;
    for (size_t r = 0; r < g.rules.size(); ++r)
        for (const Sequence& alt : g.rules[r].alternatives) {
            const int32_t a = int32_t(alts.size());
            alts.push_back({int32_t(r), int32_t(alt.size())});
            for (const Symbol& s : alt)
                if (s.kind == Symbol::Kind::Rule) used_in[size_t(s.index)].push_back(a);
            if (alt.empty() && !nullable[r]) {
                nullable[r] = true;
                found.push_back(int32_t(r));
            }
        }
    while (!found.empty()) {
        const int32_t r = found.back();
        found.pop_back();
        for (const int32_t a : used_in[size_t(r)]) {
            auto& [rule, left] = alts[size_t(a)];
            if (--left == 0 && !nullable[size_t(rule)]) {
                nullable[size_t(rule)] = true;
                found.push_back(rule);
            }
        }
    }
    return nullable;
}

Recognizer::Recognizer(const Grammar& g) : Recognizer(g, nullable_rules(g)) {}

Recognizer::Recognizer(const Grammar& g, std::vector<bool> nullable) : g_(g), nullable_(std::move(nullable)) {
    uint32_t positions = 0;
    for (const Rule& rule : g.rules) {
        first_alt_.push_back(int32_t(alt_base_.size()));
        for (const Sequence& alt : rule.alternatives) {
            alt_base_.push_back(positions);
            positions += uint32_t(alt.size()) + 1;
        }
    }
    stamp_.assign(positions, UINT32_MAX);
    sets_.emplace_back();
    generation_.push_back(next_generation_++);
    for (int32_t a = 0; a < int32_t(g.rules[size_t(g.root)].alternatives.size()); ++a) add(0, item(g.root, a, 0, 0));
    close(0);
}

Recognizer::Item Recognizer::item(int32_t rule, int32_t alt, int32_t dot, int32_t origin) const {
    Item it{rule, alt, dot, origin};
    const Sequence& seq = g_.rules[size_t(rule)].alternatives[size_t(alt)];
    if (size_t(dot) < seq.size()) (seq[size_t(dot)].kind == Symbol::Kind::Rule ? it.next_rule : it.next_class) = seq[size_t(dot)].index;
    return it;
}

void Recognizer::add(size_t at, const Item& it) {
    Set& set = sets_[at];
    uint32_t& stamp = stamp_[position_id(it)];
    if (stamp == generation_[at] && std::find(set.begin(), set.end(), it) != set.end()) return;
    stamp = generation_[at];
    set.push_back(it);
}

void Recognizer::close(size_t at) {
    // The set grows while it is walked; indices stay valid.
    for (size_t i = 0; i < sets_[at].size(); ++i) {
        const Item it = sets_[at][i];
        if (it.next_rule >= 0) {
            const int32_t b = it.next_rule;
            for (int32_t a = 0; a < int32_t(g_.rules[size_t(b)].alternatives.size()); ++a) add(at, item(b, a, 0, int32_t(at)));
            // Aycock and Horspool: a nullable rule may be stepped over at once.
            if (nullable_[size_t(b)]) add(at, item(it.rule, it.alt, it.dot + 1, it.origin));
        } else if (it.complete()) {
            // Complete: every item that waited for this rule where it began moves on.
            // (When origin == at the set grows as it is walked: index, not reference.)
            for (size_t j = 0; j < sets_[size_t(it.origin)].size(); ++j) {
                const Item& w = sets_[size_t(it.origin)][j];
                if (w.next_rule == it.rule) add(at, item(w.rule, w.alt, w.dot + 1, w.origin));
            }
        }
    }
}

bool Recognizer::expects(uint32_t lo, uint32_t hi) const {
    for (const Item& it : sets_.back())
        if (it.next_class >= 0 && g_.classes[size_t(it.next_class)].intersects(lo, hi)) return true;
    return false;
}

std::array<uint64_t, 4> Recognizer::next_bytes() const {
    std::array<uint64_t, 4> bits{};
    auto set = [&](uint32_t lo, uint32_t hi) {  // bytes lo..hi
        for (uint32_t b = lo; b <= hi; ++b) bits[b / 64] |= uint64_t(1) << (b % 64);
    };
    if (mid_character()) {
        set(0x80, 0xBF);  // a continuation byte
        return bits;
    }
    // Each class's code points by encoded length: the lead bytes of the
    // first and last code point of each range's part of that length.
    struct Length { uint32_t first, last, shift, lead; };
    constexpr Length kLengths[] = {{0, 0x7F, 0, 0}, {0x80, 0x7FF, 6, 0xC0}, {0x800, 0xFFFF, 12, 0xE0}, {0x10000, kMaxCodePoint, 18, 0xF0}};
    for (const Item& it : sets_.back()) {
        if (it.next_class < 0) continue;
        for (const auto& [lo, hi] : g_.classes[size_t(it.next_class)].ranges)
            for (const Length& l : kLengths)
                if (lo <= l.last && hi >= l.first)
                    set(l.lead | (std::max(lo, l.first) >> l.shift), l.lead | (std::min(hi, l.last) >> l.shift));
    }
    return bits;
}

bool Recognizer::scan(uint32_t cp) {
    // A popped set's storage, if there is one: the trie walks push and pop sets all the time.
    Set next;
    if (!spare_.empty()) {
        next = std::move(spare_.back());
        spare_.pop_back();
        next.clear();
    }
    for (const Item& it : sets_.back())
        if (it.next_class >= 0 && g_.classes[size_t(it.next_class)].contains(cp))
            next.push_back(item(it.rule, it.alt, it.dot + 1, it.origin));
    if (next.empty()) {
        spare_.push_back(std::move(next));
        return false;
    }
    // Advancing distinct items gives distinct items: no search, only stamps.
    const uint32_t gen = next_generation_++;
    for (const Item& it : next) stamp_[position_id(it)] = gen;
    sets_.push_back(std::move(next));
    generation_.push_back(gen);
    close(sets_.size() - 1);
    return true;
}

std::pair<uint32_t, uint32_t> utf8_prefix_range(uint32_t bytes, int len, int need) {
    uint32_t lo = 0, hi = 0;
    for (int i = 0; i < need; ++i) {
        const uint8_t b = i < len ? uint8_t(bytes >> (8 * i)) : 0;
        const uint8_t blo = i < len ? b : 0x80, bhi = i < len ? b : 0xBF;
        const uint8_t mask = i == 0 ? (need == 2 ? 0x1F : need == 3 ? 0x0F : 0x07) : 0x3F;
        lo = (lo << 6) | (blo & mask);
        hi = (hi << 6) | (bhi & mask);
    }
    const uint32_t least = need == 2 ? 0x80 : need == 3 ? 0x800 : 0x10000;  // no overlong forms
    return {std::max(lo, least), std::min(hi, kMaxCodePoint)};
}

int utf8_need(uint8_t lead) {
    const int need = (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
    return need == 0 || lead == 0xC0 || lead == 0xC1 || lead > 0xF4 ? 0 : need;
}

bool Recognizer::feed(uint8_t byte) {
    const Byte prev = history_.empty() ? Byte{true, 0, 0, 0} : history_.back();
    if (prev.pending_len == 0) {
        if (byte < 0x80) {
            if (!scan(byte)) return false;
            history_.push_back({true, 0, 0, 0});
            return true;
        }
        const int need = utf8_need(byte);
        if (need == 0) return false;
        const auto [lo, hi] = utf8_prefix_range(byte, 1, need);
        if (lo > hi || !expects(lo, hi)) return false;
        history_.push_back({false, byte, 1, uint8_t(need)});
        return true;
    }
    if ((byte & 0xC0) != 0x80) return false;
    const uint32_t bytes = prev.pending | uint32_t(byte) << (8 * prev.pending_len);
    const int len = prev.pending_len + 1, need = prev.pending_need;
    const auto [lo, hi] = utf8_prefix_range(bytes, len, need);
    if (lo > hi) return false;
    if (len < need) {
        if (!expects(lo, hi)) return false;
        history_.push_back({false, bytes, uint8_t(len), uint8_t(need)});
        return true;
    }
    if (!scan(lo)) return false;  // the whole character: lo == hi
    history_.push_back({true, 0, 0, 0});
    return true;
}

bool Recognizer::feed(std::string_view bytes) {
    for (const char c : bytes)
        if (!feed(uint8_t(c))) return false;
    return true;
}

bool Recognizer::accepting() const {
    if (!history_.empty() && history_.back().pending_len) return false;
    for (const Item& it : sets_.back())
        if (it.rule == g_.root && it.origin == 0 && it.complete()) return true;
    return false;
}

std::vector<Recognizer::Position> Recognizer::positions() const {
    std::vector<Position> out;
    for (const Item& it : sets_.back()) {
        const Position p{it.rule, it.alt, it.dot};
        if (!it.complete() && std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
    }
    return out;
}

void Recognizer::rollback(size_t bytes) {
    bytes = std::min(bytes, history_.size());
    for (size_t i = 0; i < bytes; ++i) {
        if (history_.back().completed) {
            spare_.push_back(std::move(sets_.back()));
            sets_.pop_back();
            generation_.pop_back();
        }
        history_.pop_back();
    }
}

}  // namespace minfer::grammar
