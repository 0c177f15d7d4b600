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

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/grammar/grammar.h"

namespace minfer::grammar {

class Recognizer {
public:
    // The grammar must outlive the recognizer.
    explicit Recognizer(const Grammar& g);

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

private:
    struct Item {
        int32_t rule, alt, dot, origin;
        bool operator==(const Item&) const = default;
    };
    using Set = std::vector<Item>;
    struct Byte {
        bool completed;  // the byte ended a character: a set was added
        uint32_t pending;   // the bytes of an unfinished character after it, packed
        uint8_t pending_len, pending_need;
    };

    const Symbol* next_symbol(const Item& it) const;
    void add(Set& set, const Item& it);
    void close(size_t at);  // predictions and completions of sets_[at]
    bool scan(uint32_t cp);  // a whole character
    // Some class expected now holds a code point in [lo, hi].
    bool expects(uint32_t lo, uint32_t hi) const;

    const Grammar& g_;
    std::vector<bool> nullable_;
    std::vector<Set> sets_;
    std::vector<Byte> history_;
};

}  // namespace minfer::grammar
