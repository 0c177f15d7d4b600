// Math is kept away from Markdown: `$...$` and `$$...$$` are swapped for
// placeholders before cmark parses the text (so `a_i * b_i` stays TeX, not
// emphasis) and put back, HTML-escaped, after it renders. The browser's KaTeX
// typesets them; without JavaScript the TeX shows as written.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace minfer::book {

struct ProtectedMath {
    std::string text;                   // the Markdown, each formula replaced by LKMATH<n>X
    std::vector<std::string> formulas;  // as written, delimiters included
    std::vector<bool> display;          // $$...$$
};

// Finds the formulas outside code (fenced blocks and code spans). `\$` is a
// plain dollar. An inline formula opens with `$` before a non-space, closes
// with `$` after a non-space that no digit follows, and stays in its paragraph.
ProtectedMath protect_math(std::string_view markdown);

// Puts the formulas back into cmark's HTML: a display formula alone in its
// paragraph becomes <div class="math math-display">, others
// <span class="math math-inline"> (or math-display).
std::string restore_math(std::string_view html, const ProtectedMath& math);

}  // namespace minfer::book
