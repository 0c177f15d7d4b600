// ```excerpt blocks: a few lines of the engine's source shown on the page,
// highlighted, with a caption that links to the source view. The block's only
// line is a source target (src:PATH#Symbol); the lines are the symbol's.
#pragma once

#include <string>
#include <string_view>

#include "book/site/symbols.h"

namespace minfer::book {

// The block's body -> its file and lines. Throws BookError unless the body is
// one src: line naming a symbol (a whole file is too long for an excerpt).
SourceTarget excerpt_target(std::string_view body, SymbolIndex& symbols);

// The excerpt on the HTML page: <figure class="lk-excerpt"> with the code and a caption.
std::string excerpt_html(const SourceTarget& t, const SourceTree& tree);

// The excerpt in the Markdown twin: a fenced code block and a link to the source view.
std::string excerpt_markdown(const SourceTarget& t, const SourceTree& tree);

// The highlight.js language of a file, from its name ("cpp", "bash", ...; "" if none).
std::string language_of(std::string_view path);

}  // namespace minfer::book
