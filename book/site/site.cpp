#include "book/site/site.h"

#include <boost/json.hpp>

#include <fstream>
#include <spdlog/spdlog.h>
#include <sstream>

#include "book/site/html.h"
#include "book/site/llms.h"
#include "book/site/pages.h"
#include "book/site/source_view.h"
#include "book/site/symbols.h"

namespace minfer::book {

namespace {

// A page's Markdown as plain words for the search index: link targets, code
// fences' markers and Markdown's punctuation dropped, whitespace folded.
std::string searchable_text(std::string_view markdown) {
    std::string out;
    out.reserve(markdown.size());
    for (size_t i = 0; i < markdown.size(); ++i) {
        const char c = markdown[i];
        if (c == ']' && i + 1 < markdown.size() && markdown[i + 1] == '(') {  // [text](target): keep the text
            const size_t close = markdown.find(')', i + 2);
            if (close != std::string_view::npos) i = close;
            continue;
        }
        const bool markup = c == '*' || c == '`' || c == '#' || c == '|' || c == '[' || c == '>' || c == '_';
        const bool space = markup || c == '\n' || c == '\t' || c == '\r' || c == ' ';
        if (space) {
            if (!out.empty() && out.back() != ' ') out.push_back(' ');
        } else {
            out.push_back(c);
        }
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
}

}  // namespace

namespace fs = std::filesystem;

namespace {


// Only the parts of the KaTeX and highlight.js packages the pages load.
bool katex_file(const std::string& rel) {
    return rel == "katex.min.css" || rel == "katex.min.js" || rel == "contrib/auto-render.js" ||
           rel.starts_with("fonts/");
}
bool highlight_file(const std::string& rel) {
    return rel == "highlight.min.js" || (rel.starts_with("styles/") && rel.ends_with(".css"));
}
bool theme_file(const std::string& rel) { return rel != "layout.html"; }
bool figure_file(const std::string& rel) {
    return rel.starts_with("data/") || rel.ends_with(".js") || rel.ends_with(".css");
}

}  // namespace

Site::Site(const Book& book, const SourceTree& tree) : book_(book), tree_(tree) {
    const fs::path theme = book.root / "book" / "theme";
    const fs::path figures = book.root / "book" / "figures";
    layout_ = std::make_unique<PageLayout>(book, read_text_file(theme / "layout.html"),
                                           fs::exists(figures / "figures.css"));

    add_directory(resources_, theme, "/static/", theme_file);
    if (!add_directory(resources_, kKatexDir, "/static/katex/", katex_file))
        spdlog::warn("no {} (Debian package libjs-katex): math shows as TeX", kKatexDir);
    if (!add_directory(resources_, kHighlightDir, "/static/highlight/", highlight_file))
        spdlog::warn("no {} (Debian package libjs-highlight.js): code is not highlighted", kHighlightDir);
    add_directory(resources_, figures, "/figures/", figure_file);

    SymbolIndex symbols(tree);
    LinkContext links{symbols, {}, {}};
    for (const GlossaryEntry& g : book.glossary) links.glossary_ids.insert(g.id);
    for (const std::string& p : page_paths(book)) links.page_paths.insert(p);

    PageBuilder pages(book, links);
    add_page(pages.home(), false);
    for (const Chapter& c : book.chapters) {
        add_page(pages.chapter(c), true);
        for (const Section& s : c.sections) add_page(pages.section(c, s), true);
    }
    add_page(pages.glossary(), true);
    for (const GlossaryEntry& g : book.glossary) add_page(pages.glossary_term(g), false);
    add_page(pages.reading(), true);
    for (const Page& p : book.pages) add_page(pages.page(p), true);

    const std::vector<std::string> modules = figure_module_ids(figures);
    for (const auto& [id, spec] : pages.figures())
        if (std::find(modules.begin(), modules.end(), id) == modules.end())
            throw BookError("a ```figure block uses the id \"" + id + "\", but there is no book/figures/" + id + ".js");
    for (const std::string& id : modules) {
        const auto used = pages.figures().find(id);
        FigureSpec spec;
        if (used != pages.figures().end()) spec = used->second;
        else spec.id = spec.title = id;
        add_page(pages.figure(spec), false);
    }
    resources_["/search-index.json"] = Resource{boost::json::serialize(search_index_), "application/json; charset=utf-8"};
}

void Site::add_page(const BookPage& page, bool in_full_text) {
    resources_[page.frame.path] = Resource{layout_->render(page.frame), "text/html; charset=utf-8"};
    resources_[PageLayout::markdown_url(page.frame.path)] = Resource{page.markdown, "text/markdown; charset=utf-8"};
    if (in_full_text) {
        documents_.emplace_back(page.frame.path, page.markdown);
        search_index_.push_back(boost::json::object{
            {"url", page.frame.path}, {"title", page.frame.title}, {"text", searchable_text(page.markdown)}});
    }
}

const Resource* Site::find(const std::string& path) const {
    const auto it = resources_.find(path);
    return it == resources_.end() ? nullptr : &it->second;
}

std::optional<Resource> Site::source_page(std::string_view encoded_path) const {
    const std::optional<std::string> path = tree_.lookup(encoded_path);
    if (!path) return std::nullopt;
    std::string text;
    try {
        text = tree_.read(*path);
    } catch (const BookError&) {
        return std::nullopt;  // removed since the site started
    }
    if (!looks_like_text(text)) return std::nullopt;
    PageFrame frame;
    frame.path = "/source/" + url_encode_path(*path);
    frame.title = *path;
    frame.description = "The source of " + *path + ", line by line.";
    frame.content = source_view_html(*path, text);
    return Resource{layout_->render(frame), "text/html; charset=utf-8"};
}

std::string Site::llms_txt(std::string_view base_url) const { return minfer::book::llms_txt(book_, base_url); }

std::string Site::llms_full_txt(std::string_view base_url) const {
    return minfer::book::llms_full_txt(book_, documents_, base_url);
}

Resource Site::not_found(std::string_view path) const {
    if (path.ends_with(".md"))
        return {"# Not found\n\nNo page at " + std::string(path) + ". The book's map is /llms.txt.\n",
                "text/markdown; charset=utf-8"};
    PageFrame frame;
    frame.path = std::string(path);
    frame.title = "Not found";
    frame.description = "No such page.";
    frame.content = "<h1>Not found</h1>\n<p>There is no page at <code>" + html_escape(path) +
                    "</code>. The <a href=\"/\">contents</a> list every chapter.</p>\n";
    return {layout_->render(frame), "text/html; charset=utf-8"};
}

}  // namespace minfer::book
