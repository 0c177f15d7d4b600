// One page's Markdown -> its HTML body and its Markdown twin (the .md URL and
// llms-full.txt), with the book's additions from book/AUTHORING.md: math kept
// away from Markdown, src: links and ```excerpt blocks resolved through
// ctags, glossary: links, checked internal links, and ```figure blocks.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "book/site/figure_block.h"
#include "book/site/symbols.h"

namespace minfer::book {

// What links are resolved with and checked against.
struct LinkContext {
    SymbolIndex& symbols;
    std::set<std::string> glossary_ids;
    std::set<std::string> page_paths;  // every page of the site: "/", "/about", "/chapters/SLUG", ...
};

struct RenderedMarkdown {
    std::string html;                 // the page body (cmark's HTML, math restored)
    std::string markdown;             // the twin: src:/glossary: links made plain, figures as placeholders
    std::vector<FigureSpec> figures;  // in the order they appear
    std::vector<SourceTarget> sources;  // every src: link and excerpt
};

// Throws BookError naming `page` and the offending link or block.
RenderedMarkdown render_markdown(std::string_view markdown, std::string_view page, LinkContext& links);

// The URL a link in the book points to: src: and glossary: resolved, internal
// /chapters/ and /source/ paths checked; other targets unchanged. Throws
// BookError (without the page name) for a broken one.
std::string resolve_link(std::string_view target, LinkContext& links);

}  // namespace minfer::book
