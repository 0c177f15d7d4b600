// An Earley recognizer for a Grammar, fed bytes: the reference matcher that
// says whether a text so far can still grow into a sentence of the grammar.
//
// Earley handles every context-free grammar (left recursion and ambiguity
// included), and its state after each character is a set of items, so
// undoing the last bytes (speculative decoding) is popping sets, and a fork
// (n > 1) is a copy. Characters are UTF-8: a byte that starts or continues a
// character is accepted when some character class the grammar expects here
// holds a code point that begins with these bytes, so a token may end inside
// a character.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/grammar/grammar.h"

namespace minfer::grammar {

// The code points whose UTF-8 encoding starts with the `len` bytes packed in
// `bytes` (the first in the low byte) of a character of `need` bytes; lo > hi
// if none.
std::pair<uint32_t, uint32_t> utf8_prefix_range(uint32_t bytes, int len, int need);
// The length of the character a lead byte starts (2 to 4); 0 if it starts none.
int utf8_need(uint8_t lead);

class Recognizer {
public:
    // The grammar must outlive the recognizer.
    explicit Recognizer(const Grammar& g);
    // The same with g's nullable_rules(g) computed already (for many
    // recognizers of one grammar).
    Recognizer(const Grammar& g, std::vector<bool> nullable);

    // Appends one byte if the text can still grow into a sentence; false (and
    // no change) otherwise.
    bool feed(uint8_t byte);
    // Appends bytes one by one; stops at the first rejected one and returns false.
    bool feed(std::string_view bytes);
    // The text fed is a whole sentence (no character left half-way).
    bool accepting() const;
    // Bytes fed so far.
    size_t size() const { return history_.size(); }
    // Undoes the last `bytes` bytes (at most size()).
    void rollback(size_t bytes);

    // Where the text stands in the grammar: the (rule, alternative, dot) of
    // every item of the last set that is not complete, each once. What may
    // follow the text is what may follow one of them (token_mask.h).
    struct Position {
        int32_t rule, alt, dot;
        bool operator==(const Position&) const = default;
    };
    std::vector<Position> positions() const;
    // The bytes feed() may take next, as a bitset (bit b of word b / 64): a
    // superset (a lead byte is there when some class expects a code point it
    // begins, whatever follows it), so that a walk feeds only those.
    std::array<uint64_t, 4> next_bytes() const;
    // The last byte fed left a character unfinished (positions() then says
    // where the character started, not where its next byte may go).
    bool mid_character() const { return !history_.empty() && history_.back().pending_len > 0; }

private:
    struct Item {
        int32_t rule, alt, dot, origin;
        // The symbol after the dot, kept in the item so that the loops over a
        // set read no rule: a rule's index, or a class's; -1 for the other kind
        // (both -1: the item is complete).
        int32_t next_rule = -1, next_class = -1;
        bool operator==(const Item& o) const { return rule == o.rule && alt == o.alt && dot == o.dot && origin == o.origin; }
        bool complete() const { return next_rule < 0 && next_class < 0; }
    };
    using Set = std::vector<Item>;
    struct Byte {
        bool completed;  // the byte ended a character: a set was added
        uint32_t pending;   // the bytes of an unfinished character after it, packed
        uint8_t pending_len, pending_need;
    };

    // The item (rule, alt, dot, origin) with its next symbol filled in.
    Item item(int32_t rule, int32_t alt, int32_t dot, int32_t origin) const;
    void add(size_t at, const Item& it);
    uint32_t position_id(const Item& it) const { return alt_base_[size_t(first_alt_[size_t(it.rule)] + it.alt)] + uint32_t(it.dot); }
    void close(size_t at);  // predictions and completions of sets_[at]
    bool scan(uint32_t cp);  // a whole character
    // Some class expected now holds a code point in [lo, hi].
    bool expects(uint32_t lo, uint32_t hi) const;

    const Grammar& g_;
    std::vector<bool> nullable_;
    std::vector<Set> sets_;
    std::vector<Set> spare_;  // storage of popped sets, for the next ones
    std::vector<Byte> history_;
    // Whether a set may hold an item of a position, without a search: each set
    // gets a fresh generation, and stamp_[position] is the generation of the
    // last set that took an item there (only then is the set searched).
    std::vector<int32_t> first_alt_;   // per rule: its first alternative's index in alt_base_
    std::vector<uint32_t> alt_base_;   // per alternative: the id of its dot-0 position
    std::vector<uint32_t> stamp_;      // per position
    std::vector<uint32_t> generation_; // per set
    uint32_t next_generation_ = 0;
};

}  // namespace minfer::grammar
