// /source/PATH: one repository file, line-numbered (anchors L1..Ln in the
// gutter), highlighted in the browser by highlight.js; site.js marks the
// range a #L12-L48 fragment names.
#pragma once

#include <string>
#include <string_view>

namespace minfer::book {

// The HTML inside <main> for the file `path` with contents `text`.
std::string source_view_html(std::string_view path, std::string_view text);

}  // namespace minfer::book
