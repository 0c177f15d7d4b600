// Regular expressions (the ECMAScript subset JSON Schema's `pattern` uses)
// compiled to a Grammar that matches the whole text: `guided_regex`,
// `structured_outputs.regex`, `minfer run --regex`.
//
// Taken: literals and escapes (\n \r \t \f \v \0 \xHH \uHHHH \u{H...} and
// escaped punctuation), `.` (any character but a line break), classes with
// ranges and negation, \d \D \w \W \s \S, groups `( )` and `(?: )`,
// alternation, `* + ? {m} {m,} {m,n}` (lazy forms match the same texts), and
// `^`/`$` at the ends. Refused with an error that names the column:
// backreferences, lookaround, named groups, flags.
#pragma once

#include <string>
#include <string_view>

#include "engine/grammar/grammar.h"

namespace minfer::grammar {

Grammar regex_grammar(std::string_view pattern);

// The pattern as one GBNF expression (its groups and repetitions inline), for
// front ends that embed it (JSON Schema's pattern and format). A leading `^`
// and trailing `$` are dropped: the caller decides what surrounds it.
std::string regex_gbnf(std::string_view pattern);

}  // namespace minfer::grammar
