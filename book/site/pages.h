// The content of each page of the site, as HTML (for the layout's <main>) and
// as its Markdown twin: home, chapter overviews, sections, glossary, further
// reading, the pages outside the chapters, and one page per figure.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "book/site/book_index.h"
#include "book/site/markdown.h"
#include "book/site/page_layout.h"

namespace minfer::book {

struct BookPage {
    PageFrame frame;
    std::string markdown;  // the .md twin
};

// A page that links a glossary term: a section, or a chapter's overview (section null).
struct TermUse {
    const Chapter* chapter;
    const Section* section;
};

class PageBuilder {
public:
    PageBuilder(const Book& book, LinkContext& links) : book_(book), links_(links) {}

    BookPage home();
    BookPage chapter(const Chapter& c);
    BookPage section(const Chapter& c, const Section& s);
    BookPage glossary();
    BookPage glossary_term(const GlossaryEntry& entry);
    BookPage reading();
    BookPage page(const Page& p);
    // A page with just the figure (its spec from the first block that used it).
    BookPage figure(const FigureSpec& f);

    // Every figure the pages rendered so far use, by id: the first block's spec.
    const std::map<std::string, FigureSpec>& figures() const { return figures_; }

private:
    RenderedMarkdown render(std::string_view markdown, const std::string& page);
    // Each glossary id's pages, in reading order: read from the book once, for the glossary and every term page.
    const std::map<std::string, std::vector<TermUse>>& term_uses();

    const Book& book_;
    LinkContext& links_;
    std::map<std::string, FigureSpec> figures_;
    std::optional<std::map<std::string, std::vector<TermUse>>> term_uses_;
};

// The site paths of every page above except figures, in reading order.
std::vector<std::string> page_paths(const Book& book);
// A glossary term's own page: /chapters/glossary/ID.
std::string glossary_term_path(const GlossaryEntry& entry);

}  // namespace minfer::book
