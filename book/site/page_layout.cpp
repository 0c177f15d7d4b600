#include "book/site/page_layout.h"

#include <algorithm>

#include "book/site/heading_ids.h"

#include "book/site/html.h"

namespace minfer::book {

namespace {

std::string chapter_label(const Chapter& c) { return std::to_string(c.number) + ". " + c.title; }

}  // namespace

PageLayout::PageLayout(const Book& book, std::string layout_html, bool figure_styles)
    : book_(book), layout_(std::move(layout_html)), figure_styles_(figure_styles) {
    order_.push_back({"/", book.title});
    for (const Chapter& c : book.chapters) {
        order_.push_back({chapter_path(c), chapter_label(c)});
        for (const Section& s : c.sections) order_.push_back({section_path(c, s), s.title});
    }
    order_.push_back({"/chapters/glossary", "Glossary"});
    order_.push_back({"/chapters/reading", "Further reading"});
}

std::string PageLayout::markdown_url(std::string_view path) {
    return path == "/" ? "/index.md" : std::string(path) + ".md";
}

std::string PageLayout::toc(std::string_view current) const {
    const auto link = [&](const std::string& path, const std::string& label) {
        const bool here = path == current;
        return "<a href=\"" + path + "\"" + (here ? " aria-current=\"page\"" : "") + ">" + html_escape(label) + "</a>";
    };
    std::string h = "<ol class=\"toc-chapters\">\n";
    for (const Chapter& c : book_.chapters) {
        h += "<li>" + link(chapter_path(c), chapter_label(c)) + "\n<ol class=\"toc-sections\">\n";
        for (const Section& s : c.sections) {
            h += "<li>" + link(section_path(c, s), s.title);
            if (!s.written) h += " <span class=\"badge badge-small\" title=\"in preparation\">soon</span>";
            h += "</li>\n";
        }
        h += "</ol></li>\n";
    }
    h += "</ol>\n<ul class=\"toc-reference\">\n<li>" + link("/chapters/glossary", "Glossary") + "</li>\n<li>" +
         link("/chapters/reading", "Further reading") + "</li>\n</ul>";
    return h;
}

std::string PageLayout::pager(std::string_view current) const {
    for (size_t i = 0; i < order_.size(); ++i) {
        if (order_[i].path != current) continue;
        std::string h = "<nav class=\"pager\" aria-label=\"Previous and next\">";
        if (i > 0)
            h += "<a class=\"prev\" rel=\"prev\" href=\"" + order_[i - 1].path + "\">← " +
                 html_escape(order_[i - 1].label) + "</a>";
        if (i + 1 < order_.size())
            h += "<a class=\"next\" rel=\"next\" href=\"" + order_[i + 1].path + "\">" +
                 html_escape(order_[i + 1].label) + " →</a>";
        return h + "</nav>";
    }
    return "";  // pages outside the reading order (about, privacy, ...) have no pager
}

std::string PageLayout::head(std::string_view content) const {
    std::string h;
    if (content.find("class=\"math ") != std::string_view::npos)
        h += "<link rel=\"stylesheet\" href=\"/static/katex/katex.min.css\">\n"
             "<script defer src=\"/static/katex/katex.min.js\"></script>\n"
             "<script defer src=\"/static/katex/contrib/auto-render.js\"></script>\n";
    if (content.find("class=\"language-") != std::string_view::npos)
        h += "<link rel=\"stylesheet\" href=\"/static/highlight/styles/github.css\">\n"
             "<script defer src=\"/static/highlight/highlight.min.js\"></script>\n";
    if (figure_styles_ && content.find("class=\"lk-figure\"") != std::string_view::npos)
        h += "<link rel=\"stylesheet\" href=\"/figures/figures.css\">\n";
    return h;
}

// "On this page": the h2 and h3 headings of a page with three or more h2s.
std::string PageLayout::page_toc(std::string_view content) const {
    const std::vector<Heading> outline = page_outline(content);
    if (std::count_if(outline.begin(), outline.end(), [](const Heading& h) { return h.level == 2; }) < 3) return "";
    std::string h = "<nav class=\"page-toc\" aria-label=\"On this page\"><details><summary>On this page</summary>\n<ol>\n";
    bool nested = false;
    for (size_t i = 0; i < outline.size(); ++i) {
        const Heading& x = outline[i];
        if (x.level == 3 && !nested) {
            h += "<ol>\n";
            nested = true;
        } else if (x.level == 2 && nested) {
            h += "</ol></li>\n";
            nested = false;
        } else if (i > 0) {
            h += "</li>\n";
        }
        h += "<li><a href=\"#" + x.id + "\">" + x.text + "</a>";
        if (x.level == 3) h += "</li>\n";
    }
    h += nested ? "</ol></li>\n" : (outline.empty() ? "" : "</li>\n");
    return h + "</ol>\n</details></nav>";
}

std::string PageLayout::render(const PageFrame& page) const {
    const std::string title = page.path == "/" ? book_.title : page.title + " · " + book_.title;
    return fill_template(layout_, {{"title", html_escape(title)},
                                   {"description", html_escape(page.description)},
                                   {"head", head(page.content)},
                                   {"markdown_url", html_escape(markdown_url(page.path))},  // a 404's path is the client's
                                   {"book_title", html_escape(book_.title)},
                                   {"toc", toc(page.path)},
                                   {"page_toc", page_toc(page.content)},
                                   {"content", page.content},
                                   {"pager", pager(page.path)}});
}

}  // namespace minfer::book
