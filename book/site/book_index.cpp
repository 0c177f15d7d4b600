#include "book/site/book_index.h"

#include <boost/json.hpp>
#include <fstream>
#include <set>
#include <sstream>

namespace minfer::book {

namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

json::value read_json(const fs::path& p) {
    boost::system::error_code ec;
    json::value v = json::parse(read_text_file(p), ec);
    if (ec) throw BookError("book: " + p.string() + " is not valid JSON: " + ec.message());
    return v;
}

// The string field `key` of `o`, required unless `optional`.
std::string str(const json::object& o, const char* key, const fs::path& file, bool optional = false) {
    const json::value* v = o.if_contains(key);
    if (!v || !v->is_string()) {
        if (optional && !v) return {};
        throw BookError("book: " + file.string() + ": an entry lacks the string field \"" + key + "\"");
    }
    return std::string(v->as_string());
}

const json::array& arr(const json::value& v, const char* what, const fs::path& file) {
    if (!v.is_array()) throw BookError("book: " + file.string() + ": " + what + " must be an array");
    return v.as_array();
}

const json::object& obj(const json::value& v, const fs::path& file) {
    if (!v.is_object()) throw BookError("book: " + file.string() + ": every entry must be an object");
    return v.as_object();
}

void check_slug(const std::string& slug, const fs::path& file) {
    bool ok = !slug.empty();
    for (char c : slug) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-');
    if (!ok) throw BookError("book: " + file.string() + ": \"" + slug + "\" is not a slug (a-z, 0-9, -)");
}

}  // namespace

std::string read_text_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) throw BookError("book: cannot read " + p.string());
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

const Chapter* Book::chapter(std::string_view slug) const {
    for (const Chapter& c : chapters)
        if (c.slug == slug) return &c;
    return nullptr;
}

const Section* Book::section(std::string_view chapter_slug, std::string_view section_slug) const {
    const Chapter* c = chapter(chapter_slug);
    if (!c) return nullptr;
    for (const Section& s : c->sections)
        if (s.slug == section_slug) return &s;
    return nullptr;
}

std::string chapter_path(const Chapter& c) { return "/chapters/" + c.slug; }
std::string section_path(const Chapter& c, const Section& s) { return "/chapters/" + c.slug + "/" + s.slug; }

Book load_book(const fs::path& repo_root) {
    const fs::path content = repo_root / "book" / "content";
    Book book;
    book.root = repo_root;

    const fs::path book_file = content / "book.json";
    const json::value book_json = read_json(book_file);
    const json::object& top = obj(book_json, book_file);
    book.title = str(top, "title", book_file);
    book.subtitle = str(top, "subtitle", book_file, true);
    book.summary = str(top, "summary", book_file);
    std::set<std::string> chapter_slugs;
    for (const json::value& cv : arr(top.at("chapters"), "chapters", book_file)) {
        const json::object& co = obj(cv, book_file);
        Chapter c;
        c.number = co.contains("number") && co.at("number").is_int64() ? int(co.at("number").as_int64()) : 0;
        c.slug = str(co, "slug", book_file);
        check_slug(c.slug, book_file);
        if (!chapter_slugs.insert(c.slug).second) throw BookError("book: duplicate chapter slug " + c.slug);
        c.title = str(co, "title", book_file);
        c.summary = str(co, "summary", book_file);
        c.description = str(co, "description", book_file);
        c.markdown = read_text_file(content / c.slug / "index.md");
        std::set<std::string> section_slugs;
        for (const json::value& sv : arr(co.at("sections"), "sections", book_file)) {
            const json::object& so = obj(sv, book_file);
            Section s;
            s.slug = str(so, "slug", book_file);
            check_slug(s.slug, book_file);
            if (s.slug == "index" || !section_slugs.insert(s.slug).second)
                throw BookError("book: bad or duplicate section slug " + c.slug + "/" + s.slug);
            s.title = str(so, "title", book_file);
            s.summary = str(so, "summary", book_file);
            const std::string status = str(so, "status", book_file);
            if (status != "written" && status != "in-preparation")
                throw BookError("book: " + c.slug + "/" + s.slug + ": status must be written or in-preparation");
            s.written = status == "written";
            s.markdown = read_text_file(content / c.slug / (s.slug + ".md"));
            c.sections.push_back(std::move(s));
        }
        book.chapters.push_back(std::move(c));
    }

    const fs::path glossary_file = content / "glossary.json";
    std::set<std::string> ids;
    const json::value glossary_json = read_json(glossary_file);
    for (const json::value& gv : arr(glossary_json, "the glossary", glossary_file)) {
        const json::object& go = obj(gv, glossary_file);
        GlossaryEntry g;
        g.id = str(go, "id", glossary_file);
        check_slug(g.id, glossary_file);
        if (!ids.insert(g.id).second) throw BookError("book: duplicate glossary id " + g.id);
        g.term = str(go, "term", glossary_file);
        g.definition = str(go, "definition", glossary_file);
        if (const json::value* see = go.if_contains("see_also"))
            for (const json::value& x : arr(*see, "see_also", glossary_file))
                if (x.is_string()) g.see_also.emplace_back(x.as_string());
        book.glossary.push_back(std::move(g));
    }
    for (const GlossaryEntry& g : book.glossary)
        for (const std::string& other : g.see_also)
            if (!ids.count(other)) throw BookError("book: glossary entry " + g.id + " refers to no entry " + other);

    const fs::path groups_file = content / "reading_groups.json";
    std::set<std::string> groups;
    const json::value groups_json = read_json(groups_file);
    for (const json::value& rv : arr(groups_json, "the reading groups", groups_file)) {
        const json::object& ro = obj(rv, groups_file);
        ReadingGroup g{str(ro, "id", groups_file), str(ro, "title", groups_file), str(ro, "description", groups_file)};
        check_slug(g.id, groups_file);
        if (!groups.insert(g.id).second) throw BookError("book: duplicate reading group " + g.id);
        book.reading_groups.push_back(std::move(g));
    }
    const fs::path reading_file = content / "reading.json";
    const json::value reading_json = read_json(reading_file);
    for (const json::value& rv : arr(reading_json, "the reading list", reading_file)) {
        const json::object& ro = obj(rv, reading_file);
        ReadingEntry e;
        e.group = str(ro, "group", reading_file);
        if (!groups.count(e.group)) throw BookError("book: reading entry in unknown group " + e.group);
        e.title = str(ro, "title", reading_file);
        e.authors = str(ro, "authors", reading_file, true);
        e.url = str(ro, "url", reading_file);
        e.note = str(ro, "note", reading_file);
        if (const json::value* y = ro.if_contains("year"); y && y->is_int64()) e.year = int(y->as_int64());
        book.reading.push_back(std::move(e));
    }

    for (const char* name : {"about", "privacy", "developers"}) {
        Page p;
        p.slug = name;
        p.markdown = read_text_file(content / "pages" / (std::string(name) + ".md"));
        // The title is the first "# " heading.
        const size_t h = p.markdown.find("# ");
        if (h != 0) throw BookError("book: book/content/pages/" + p.slug + ".md must start with a '# Title' line");
        p.title = p.markdown.substr(2, p.markdown.find('\n') - 2);
        book.pages.push_back(std::move(p));
    }
    return book;
}

}  // namespace minfer::book
