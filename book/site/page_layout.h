// Every HTML page of the site in one frame (book/theme/layout.html): the
// header, the table of contents of all chapters and sections, previous/next
// links in reading order, and only the scripts the page needs (KaTeX when it
// has math, highlight.js when it has code, figure styles when it has figures).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "book/site/book_index.h"

namespace minfer::book {

struct PageFrame {
    std::string path;         // the page's URL path: "/", "/chapters/foundations", ...
    std::string title;        // for <title>; the book's title is appended
    std::string description;  // <meta name="description">
    std::string content;      // the HTML inside <main>
};

class PageLayout {
public:
    // layout_html: the template's text; figure_styles: whether /figures/figures.css exists.
    PageLayout(const Book& book, std::string layout_html, bool figure_styles);

    std::string render(const PageFrame& page) const;
    // The page's own table of contents (h2 and h3), when it has three h2s or more.
    std::string page_toc(std::string_view content) const;

    // The .md twin of a page path ("/" -> "/index.md").
    static std::string markdown_url(std::string_view path);

private:
    std::string toc(std::string_view current) const;
    std::string pager(std::string_view current) const;
    std::string head(std::string_view content) const;

    struct Stop {
        std::string path, label;
    };
    const Book& book_;
    std::string layout_;
    bool figure_styles_;
    std::vector<Stop> order_;  // home, each chapter's overview then its sections, glossary, reading
};

}  // namespace minfer::book
