#include "book/site/pages.h"

#include <map>

#include "book/site/html.h"

#include <utility>

namespace minfer::book {

namespace {

std::string badge_html() { return "<p class=\"badge\">In preparation</p>\n"; }

// Every page starts from its URL path, title and description; the callers add
// the content and the .md twin.
BookPage titled_page(std::string path, std::string title, std::string description) {
    BookPage p;
    p.frame.path = std::move(path);
    p.frame.title = std::move(title);
    p.frame.description = std::move(description);
    return p;
}

std::string section_list_html(const Chapter& c) {
    std::string h = "<ol class=\"section-list\">\n";
    for (const Section& s : c.sections) {
        h += "<li><a href=\"" + section_path(c, s) + "\">" + html_escape(s.title) + "</a>";
        if (!s.written) h += " <span class=\"badge badge-small\">in preparation</span>";
        h += "<p>" + html_escape(s.summary) + "</p></li>\n";
    }
    return h + "</ol>\n";
}

std::string section_list_markdown(const Chapter& c) {
    std::string m;
    for (const Section& s : c.sections)
        m += "- [" + s.title + "](" + section_path(c, s) + ".md)" + (s.written ? "" : " (in preparation)") + ": " +
             s.summary + "\n";
    return m;
}

}  // namespace

std::vector<std::string> page_paths(const Book& book) {
    std::vector<std::string> paths = {"/"};
    for (const Chapter& c : book.chapters) {
        paths.push_back(chapter_path(c));
        for (const Section& s : c.sections) paths.push_back(section_path(c, s));
    }
    paths.push_back("/chapters/glossary");
    for (const GlossaryEntry& g : book.glossary) paths.push_back(glossary_term_path(g));
    paths.push_back("/chapters/reading");
    for (const Page& p : book.pages) paths.push_back("/" + p.slug);
    return paths;
}

RenderedMarkdown PageBuilder::render(std::string_view markdown, const std::string& page) {
    RenderedMarkdown r = render_markdown(markdown, page, links_);
    for (const FigureSpec& f : r.figures) figures_.emplace(f.id, f);
    return r;
}

BookPage PageBuilder::home() {
    BookPage p = titled_page("/", book_.title, book_.summary);
    std::string& h = p.frame.content;
    h = "<h1>" + html_escape(book_.title) + "</h1>\n";
    if (!book_.subtitle.empty()) h += "<p class=\"subtitle\">" + html_escape(book_.subtitle) + "</p>\n";
    h += "<p class=\"summary\">" + html_escape(book_.summary) + "</p>\n<h2>Chapters</h2>\n<ol class=\"chapter-list\">\n";
    p.markdown = "# " + book_.title + "\n\n";
    if (!book_.subtitle.empty()) p.markdown += "*" + book_.subtitle + "*\n\n";
    p.markdown += "> " + book_.summary + "\n\n## Chapters\n\n";
    for (const Chapter& c : book_.chapters) {
        h += "<li value=\"" + std::to_string(c.number) + "\"><a href=\"" + chapter_path(c) + "\">" +
             html_escape(c.title) + "</a><p>" + html_escape(c.summary) + "</p></li>\n";
        p.markdown += std::to_string(c.number) + ". [" + c.title + "](" + chapter_path(c) + ".md): " + c.summary + "\n";
    }
    h += "</ol>\n<p>Also: the <a href=\"/chapters/glossary\">glossary</a>, <a href=\"/chapters/reading\">further "
         "reading</a>, and every page <a href=\"/llms.txt\">as Markdown</a>.</p>\n";
    p.markdown += "\nAlso: [the glossary](/chapters/glossary.md), [further reading](/chapters/reading.md).\n";
    return p;
}

BookPage PageBuilder::chapter(const Chapter& c) {
    const RenderedMarkdown r = render(c.markdown, "book/content/" + c.slug + "/index.md");
    BookPage p = titled_page(chapter_path(c), std::to_string(c.number) + ". " + c.title, c.summary);
    p.frame.content = "<p class=\"kicker\">Chapter " + std::to_string(c.number) + "</p>\n<article>\n" + r.html +
                      "</article>\n<h2>Sections</h2>\n" + section_list_html(c);
    p.markdown = r.markdown + "\n## Sections\n\n" + section_list_markdown(c);
    return p;
}

BookPage PageBuilder::section(const Chapter& c, const Section& s) {
    const RenderedMarkdown r = render(s.markdown, "book/content/" + c.slug + "/" + s.slug + ".md");
    BookPage p = titled_page(section_path(c, s), s.title, s.summary);
    p.frame.content = "<p class=\"kicker\"><a href=\"" + chapter_path(c) + "\">Chapter " + std::to_string(c.number) +
                      ". " + html_escape(c.title) + "</a></p>\n" + (s.written ? "" : badge_html()) + "<article>\n" +
                      r.html + "</article>\n";
    p.markdown = (s.written ? "" : "> Status: in preparation.\n\n") + r.markdown;
    return p;
}

namespace {

// Where each glossary term is used: the pages whose Markdown links
// glossary:ID, in reading order.
std::map<std::string, std::vector<TermUse>> glossary_uses(const Book& book) {
    std::map<std::string, std::vector<TermUse>> uses;
    auto scan = [&](const std::string& markdown, TermUse where) {
        for (size_t at = markdown.find("(glossary:"); at != std::string::npos;
             at = markdown.find("(glossary:", at + 10)) {
            const size_t end = markdown.find_first_of(")#", at + 10);
            if (end == std::string::npos) break;
            std::vector<TermUse>& list = uses[markdown.substr(at + 10, end - at - 10)];
            if (list.empty() || list.back().chapter != where.chapter || list.back().section != where.section)
                list.push_back(where);
        }
    };
    for (const Chapter& c : book.chapters) {
        scan(c.markdown, {&c, nullptr});
        for (const Section& s : c.sections) scan(s.markdown, {&c, &s});
    }
    return uses;
}

std::string use_path(const TermUse& u) { return u.section ? section_path(*u.chapter, *u.section) : chapter_path(*u.chapter); }
std::string use_title(const TermUse& u) {
    return u.section ? u.section->title : std::to_string(u.chapter->number) + ". " + u.chapter->title;
}

}  // namespace

const std::map<std::string, std::vector<TermUse>>& PageBuilder::term_uses() {
    if (!term_uses_) term_uses_ = glossary_uses(book_);
    return *term_uses_;
}

std::string glossary_term_path(const GlossaryEntry& g) { return "/chapters/glossary/" + g.id; }

// The glossary, grouped by layer: a term sits under the chapter that first
// uses it (the chapters go from one thread up to a serving cluster); terms
// no page uses yet come last. Each term also has a page of its own.
BookPage PageBuilder::glossary() {
    BookPage p = titled_page("/chapters/glossary", "Glossary", "Every term the book uses, with a short definition.");
    std::string& h = p.frame.content;
    h = "<h1>Glossary</h1>\n"
        "<p class=\"glossary-search\" hidden><label>Filter terms <input type=\"search\" id=\"glossary-filter\" "
        "autocomplete=\"off\"></label> <span id=\"glossary-count\" aria-live=\"polite\"></span></p>\n";
    p.markdown = "# Glossary\n\n";
    const std::map<std::string, std::vector<TermUse>>& uses = term_uses();
    std::vector<std::pair<std::string, std::vector<const GlossaryEntry*>>> groups;
    for (const Chapter& c : book_.chapters) groups.push_back({std::to_string(c.number) + ". " + c.title, {}});
    groups.push_back({"Not yet used in a section", {}});
    for (const GlossaryEntry& g : book_.glossary) {
        const auto it = uses.find(g.id);
        const size_t group = it == uses.end() || it->second.empty() ? book_.chapters.size()
                                                                    : size_t(it->second.front().chapter - book_.chapters.data());
        groups[group].second.push_back(&g);
    }
    for (const auto& [title, entries] : groups) {
        if (entries.empty()) continue;
        h += "<section class=\"glossary-group\">\n<h2>" + html_escape(title) + "</h2>\n<dl class=\"glossary\">\n";
        p.markdown += "## " + title + "\n\n";
        for (const GlossaryEntry* g : entries) {
            const RenderedMarkdown def = render(g->definition, "book/content/glossary.json (" + g->id + ")");
            h += "<div class=\"glossary-entry\" id=\"" + g->id + "\">\n<dt><a href=\"" + glossary_term_path(*g) + "\">" +
                 html_escape(g->term) + "</a></dt>\n<dd>" + def.html;
            p.markdown += "### [" + g->term + "](" + glossary_term_path(*g) + ")\n\n" + def.markdown + "\n";
            if (!g->see_also.empty()) {
                h += "<p class=\"see-also\">See also: ";
                p.markdown += "See also: ";
                for (size_t i = 0; i < g->see_also.size(); ++i) {
                    const GlossaryEntry* other = nullptr;
                    for (const GlossaryEntry& o : book_.glossary)
                        if (o.id == g->see_also[i]) other = &o;
                    const std::string sep = i ? ", " : "";
                    h += sep + "<a href=\"#" + g->see_also[i] + "\">" + html_escape(other->term) + "</a>";
                    p.markdown += sep + "[" + other->term + "](/chapters/glossary#" + g->see_also[i] + ")";
                }
                h += "</p>";
                p.markdown += "\n";
            }
            h += "</dd>\n</div>\n";
            p.markdown += "\n";
        }
        h += "</dl>\n</section>\n";
    }
    return p;
}

// One term: its definition, the terms beside it, and every page that uses it.
BookPage PageBuilder::glossary_term(const GlossaryEntry& g) {
    BookPage p = titled_page(glossary_term_path(g), g.term, "The glossary's entry for " + g.term + ".");
    std::string& h = p.frame.content;
    const RenderedMarkdown def = render(g.definition, "book/content/glossary.json (" + g.id + ")");
    h = "<h1>" + html_escape(g.term) + "</h1>\n" + def.html;
    p.markdown = "# " + g.term + "\n\n" + def.markdown + "\n";
    if (!g.see_also.empty()) {
        h += "<h2>See also</h2>\n<ul>\n";
        p.markdown += "## See also\n\n";
        for (const std::string& id : g.see_also)
            for (const GlossaryEntry& o : book_.glossary)
                if (o.id == id) {
                    h += "<li><a href=\"" + glossary_term_path(o) + "\">" + html_escape(o.term) + "</a></li>\n";
                    p.markdown += "- [" + o.term + "](" + glossary_term_path(o) + ")\n";
                }
        h += "</ul>\n";
        p.markdown += "\n";
    }
    const std::map<std::string, std::vector<TermUse>>& uses = term_uses();
    const auto it = uses.find(g.id);
    h += "<h2>Used in</h2>\n";
    p.markdown += "## Used in\n\n";
    if (it == uses.end() || it->second.empty()) {
        h += "<p>No section links this term yet.</p>\n";
        p.markdown += "No section links this term yet.\n";
    } else {
        h += "<ul class=\"term-uses\">\n";
        for (const TermUse& u : it->second) {
            h += "<li><a href=\"" + use_path(u) + "\">" + html_escape(use_title(u)) + "</a></li>\n";
            p.markdown += "- [" + use_title(u) + "](" + use_path(u) + ")\n";
        }
        h += "</ul>\n";
    }
    h += "<p><a href=\"/chapters/glossary#" + g.id + "\">The whole glossary</a></p>\n";
    p.markdown += "\n[The whole glossary](/chapters/glossary#" + g.id + ")\n";
    return p;
}

BookPage PageBuilder::reading() {
    BookPage p = titled_page("/chapters/reading", "Further reading",
                             "Papers, posts and code worth reading next, grouped by topic.");
    std::string& h = p.frame.content;
    h = "<h1>Further reading</h1>\n";
    p.markdown = "# Further reading\n\n";
    for (const ReadingGroup& g : book_.reading_groups) {
        h += "<section class=\"reading-group\" id=\"" + g.id + "\">\n<h2><a href=\"#" + g.id + "\">" +
             html_escape(g.title) + "</a></h2>\n";
        p.markdown += "## " + g.title + "\n\n";
        if (!g.description.empty()) {
            h += "<p>" + html_escape(g.description) + "</p>\n";
            p.markdown += g.description + "\n\n";
        }
        h += "<ul class=\"reading-list\">\n";
        for (const ReadingEntry& e : book_.reading) {
            if (e.group != g.id) continue;
            std::string by = e.authors;
            if (e.year) by += (by.empty() ? "" : ", ") + std::to_string(e.year);
            h += "<li><a href=\"" + html_escape(e.url) + "\">" + html_escape(e.title) + "</a>" +
                 (by.empty() ? "" : " <span class=\"byline\">" + html_escape(by) + "</span>") + "<p>" +
                 html_escape(e.note) + "</p></li>\n";
            p.markdown += "- [" + e.title + "](" + e.url + ")" + (by.empty() ? "" : " (" + by + ")") + ": " + e.note + "\n";
        }
        h += "</ul>\n</section>\n";
        p.markdown += "\n";
    }
    return p;
}

BookPage PageBuilder::page(const Page& pg) {
    const RenderedMarkdown r = render(pg.markdown, "book/content/pages/" + pg.slug + ".md");
    BookPage p = titled_page("/" + pg.slug, pg.title, pg.title + " · " + book_.title);
    p.frame.content = "<article>\n" + r.html + "</article>\n";
    p.markdown = r.markdown;
    return p;
}

BookPage PageBuilder::figure(const FigureSpec& f) {
    BookPage p = titled_page("/figures/" + f.id, f.title, f.caption.empty() ? f.title : f.caption);
    p.frame.content = "<h1>" + html_escape(f.title) + "</h1>\n" + figure_html(f);
    p.markdown = "# " + f.title + "\n\n" + (f.caption.empty() ? "" : f.caption + "\n\n") +
                 "This figure is interactive: open /figures/" + f.id + " in a browser with JavaScript.\n";
    return p;
}

}  // namespace minfer::book
