// A context-free grammar over Unicode characters, the form every constraint
// (GBNF, and later JSON Schema, regex, choice) is compiled to before matching.
//
// A rule is a list of alternatives, each a sequence of symbols; a symbol is a
// rule or a character class (a set of code points that matches one UTF-8
// encoded character). Repetition and groups are already expanded into helper
// rules, so a matcher needs only sequences and alternatives.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace minfer::grammar {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// Code points as sorted, disjoint, non-adjacent closed ranges.
struct CharClass {
    std::vector<std::pair<uint32_t, uint32_t>> ranges;

    bool contains(uint32_t cp) const;
    // True if some code point in [lo, hi] is in the class.
    bool intersects(uint32_t lo, uint32_t hi) const;
    // Sorts and merges `ranges`; negate: the complement within 0..kMaxCodePoint.
    void normalize(bool negate = false);
};

struct Symbol {
    enum class Kind : uint8_t { Char, Rule };
    Kind kind;
    int32_t index;  // into Grammar::classes or Grammar::rules
    bool operator==(const Symbol&) const = default;
};

using Sequence = std::vector<Symbol>;

struct Rule {
    std::string name;                    // helper rules: the rule they came from, with a suffix
    std::vector<Sequence> alternatives;  // an empty sequence matches nothing (the empty string)
};

struct Grammar {
    std::vector<Rule> rules;
    std::vector<CharClass> classes;
    int32_t root = -1;
};

// Which rules derive the empty string: those with an alternative of nullable
// rules only (a fixpoint). Indexed by rule.
std::vector<bool> nullable_rules(const Grammar& g);

// The code point whose UTF-8 encoding starts at text[pos], advancing pos past
// it; -1 (pos unchanged) if the bytes there are not UTF-8.
int32_t next_code_point(std::string_view text, size_t& pos);

// A grammar that cannot be compiled: where (1-based line and column of the
// source, 0 if none) and why.
class GrammarError : public std::runtime_error {
public:
    GrammarError(int line, int column, const std::string& message);
    int line() const { return line_; }
    int column() const { return column_; }

private:
    int line_, column_;
};

}  // namespace minfer::grammar
