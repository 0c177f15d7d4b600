// The parts of a Markdown text that are code, found without parsing it fully:
// fenced blocks (``` or ~~~) and inline code spans. Math protection and the
// Markdown twin's link rewriting both must leave code alone, so both use this.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace minfer::book {

struct MarkdownChunk {
    bool fenced = false;
    std::string info;  // a fenced block's info string ("cpp", "figure", ...)
    std::string body;  // a fenced block's content, without its fence lines
    std::string text;  // the chunk as written (fence lines included)
};

// Splits `markdown` into alternating prose and fenced-code chunks; joining every
// chunk's text gives `markdown` back. An unclosed fence runs to the end.
std::vector<MarkdownChunk> split_fenced_blocks(std::string_view markdown);

// If an inline code span starts at `text[i]` (a run of backticks closed by a run
// of the same length), the index just past it; otherwise `i`.
size_t skip_code_span(std::string_view text, size_t i);

}  // namespace minfer::book
