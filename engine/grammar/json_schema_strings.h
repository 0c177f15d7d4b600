// JSON Schema's string keywords that become patterns (json_schema.cpp's
// helpers): where a `pattern` is anchored, the pattern of each `format`, and
// the pattern's characters held to what a JSON string writes plainly.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "engine/grammar/grammar.h"

namespace minfer::grammar {

// A schema the compiler refuses: GrammarError "at '#<pointer>': <why>".
[[noreturn]] void schema_error(const std::string& pointer, const std::string& why);

// Whether the pattern is anchored at its start (^) and end ($); an anchor
// anywhere else, or beside a top-level alternation, is refused (at `at`).
std::pair<bool, bool> pattern_anchors(const std::string& re, const std::string& at);

// The formats taken, as anchored patterns of what RFC 3339 and friends allow
// (no leap seconds, an upper-case T and Z, dot-atom e-mail addresses); any
// other format is refused (at `at`).
std::string format_pattern(const std::string& format, const std::string& at);

// In the rules named in pattern_rules (and their helpers, NAME_k), every
// class loses '"', '\\' and the control characters: a pattern's characters
// are written plainly inside a JSON string.
void restrict_patterns(Grammar& g, const std::vector<std::string>& pattern_rules);

}  // namespace minfer::grammar
