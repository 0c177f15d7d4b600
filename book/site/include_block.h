// ```include blocks: a Markdown file of the repository shown inside a page, as
// the book quotes tables that scripts write (kernels/cuda/BENCH.md, written by
// scripts/gpu.sh --bench from its measurements). The block's only line is the
// file's repository path; the page gets the file's text and a line that links
// to it. Expanded before the page is rendered, so its tables, links and math
// are the page's own.
#pragma once

#include <string>
#include <string_view>

#include "book/site/source_tree.h"

namespace minfer::book {

// `markdown` with every include block replaced by its file. Throws BookError
// unless the body is one path of a .md file in the tree without include
// blocks of its own.
std::string expand_includes(std::string_view markdown, const SourceTree& tree);

}  // namespace minfer::book
