// GBNF, llama.cpp's grammar format, compiled to a Grammar.
//
//   root   ::= item ("," item)*        # the start rule is `root`
//   item   ::= [a-z]+ | "\"" [^"]* "\""
//
// Rules are `name ::= alternatives`; a rule ends at the end of its line unless
// inside parentheses or after `|` or `::=`. Terminals: "strings" and
// [character classes] with ranges, `^` negation and the escapes \n, \r, \t,
// backslash, quote, \] and \- in classes, \xHH, \uHHHH and \UHHHHHHHH; `.` is
// any character. Postfix `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}`; `#` starts a
// comment.
#pragma once

#include <string>
#include <string_view>

#include "engine/grammar/grammar.h"

namespace minfer::grammar {

// Throws GrammarError with the line and column of the first problem.
Grammar parse_gbnf(std::string_view source);

// A GBNF string literal that matches exactly these bytes (for front ends that
// write GBNF): printable ASCII as it is, quotes, backslashes and control
// bytes as \xHH, UTF-8 as it is.
std::string gbnf_literal(std::string_view bytes);

}  // namespace minfer::grammar
