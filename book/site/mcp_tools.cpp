#include "book/site/mcp_tools.h"

#include "book/site/api_json.h"
#include "book/site/http_util.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace minfer::book {

namespace json = boost::json;

namespace {

// The JSON Schemas of what the tools return (structuredContent). The same
// shapes as the JSON API's (book/site/openapi.json); the MCP client checks
// every result against them.
constexpr const char* kSectionSchema = R"({
  "type": "object",
  "required": ["slug", "title", "summary", "status", "url", "markdown_url"],
  "properties": {
    "slug": {"type": "string"}, "title": {"type": "string"}, "summary": {"type": "string"},
    "status": {"type": "string", "enum": ["written", "in-preparation"]},
    "url": {"type": "string"}, "markdown_url": {"type": "string"}
  }
})";

json::object chapter_schema(bool with_markdown) {
    json::object schema = json::parse(R"({
      "type": "object",
      "required": ["number", "slug", "title", "summary", "description", "url", "markdown_url", "sections"],
      "properties": {
        "number": {"type": "integer"}, "slug": {"type": "string"}, "title": {"type": "string"},
        "summary": {"type": "string"}, "description": {"type": "string"},
        "url": {"type": "string"}, "markdown_url": {"type": "string"},
        "sections": {"type": "array"}
      }
    })").as_object();
    schema["properties"].as_object()["sections"].as_object()["items"] = json::parse(kSectionSchema);
    if (with_markdown) {
        schema["properties"].as_object()["markdown"] = json::object{{"type", "string"}};
        schema["required"].as_array().push_back("markdown");
    }
    return schema;
}

// An object schema whose properties are all required strings of at least one character.
json::object string_arguments(std::initializer_list<std::pair<const char*, const char*>> args) {
    json::object properties;
    json::array required;
    for (auto [name, description] : args) {
        properties[name] = json::object{{"type", "string"}, {"minLength", 1}, {"description", description}};
        required.push_back(json::string(name));
    }
    return {{"type", "object"}, {"properties", std::move(properties)}, {"required", std::move(required)},
            {"additionalProperties", false}};
}

json::object tool(const char* name, const char* title, const char* description, json::object input,
                  json::object output) {
    return {{"name", name},
            {"title", title},
            {"description", description},
            {"inputSchema", std::move(input)},
            {"outputSchema", std::move(output)},
            {"annotations", {{"readOnlyHint", true}, {"idempotentHint", true}, {"openWorldHint", false}}}};
}

// The string argument `name`: present, a string, not empty; nothing else allowed.
std::string string_argument(const json::object& arguments, const char* name) {
    for (const auto& kv : arguments)
        if (kv.key() != name) throw InvalidParams("unknown argument \"" + std::string(kv.key()) + "\"");
    const json::value* v = arguments.if_contains(name);
    if (!v) throw InvalidParams(std::string("missing required argument \"") + name + "\"");
    if (!v->is_string()) throw InvalidParams(std::string("argument \"") + name + "\" must be a string");
    if (v->as_string().empty()) throw InvalidParams(std::string("argument \"") + name + "\" must not be empty");
    return std::string(v->as_string());
}

json::object success(json::object structured) {
    json::array content{json::object{{"type", "text"}, {"text", json::serialize(structured)}}};
    return {{"content", std::move(content)}, {"structuredContent", std::move(structured)}, {"isError", false}};
}

json::object failure(const std::string& message) {
    json::array content{json::object{{"type", "text"}, {"text", message}}};
    return {{"content", std::move(content)}, {"isError", true}};
}

}  // namespace

BookTools::BookTools(const Book& book) : book_(book) {
    json::object chapter_list{{"type", "object"},
                              {"required", json::array{"chapters"}},
                              {"properties", {{"chapters", {{"type", "array"}, {"items", chapter_schema(false)}}}}}};
    json::object entry = json::parse(R"({
      "type": "object",
      "required": ["id", "term", "definition", "see_also", "url"],
      "properties": {
        "id": {"type": "string"}, "term": {"type": "string"}, "definition": {"type": "string"},
        "see_also": {"type": "array", "items": {"type": "string"}}, "url": {"type": "string"}
      }
    })").as_object();
    json::object matches{{"type", "object"},
                         {"required", json::array{"query", "matches"}},
                         {"properties", {{"query", {{"type", "string"}}},
                                         {"matches", {{"type", "array"}, {"items", std::move(entry)}}}}}};
    json::object section_out = json::parse(kSectionSchema).as_object();
    section_out["properties"].as_object()["chapter"] = json::object{{"type", "string"}};
    section_out["properties"].as_object()["markdown"] = json::object{{"type", "string"}};
    section_out["required"].as_array().push_back("chapter");
    section_out["required"].as_array().push_back("markdown");
    json::object hit = json::parse(R"({
      "type": "object",
      "required": ["chapter", "slug", "title", "url", "matches", "excerpt"],
      "properties": {
        "chapter": {"type": "string"}, "slug": {"type": "string"}, "title": {"type": "string"},
        "url": {"type": "string"}, "matches": {"type": "integer"}, "excerpt": {"type": "string"}
      }
    })").as_object();
    json::object hits{{"type", "object"},
                      {"required", json::array{"query", "results"}},
                      {"properties", {{"query", {{"type", "string"}}},
                                      {"results", {{"type", "array"}, {"items", std::move(hit)}}}}}};
    definitions_ = {
        tool("list_chapters", "List the chapters",
             "The book's table of contents: every chapter of Learn Kernels with its sections, their status "
             "(written or in preparation) and the URLs of their pages and Markdown sources.",
             {{"type", "object"}, {"properties", json::object{}}, {"additionalProperties", false}},
             std::move(chapter_list)),
        tool("get_chapter", "Get a chapter",
             "One chapter by its slug (from list_chapters): its sections and the Markdown of its overview page.",
             string_arguments({{"slug", "The chapter's slug, e.g. one listed by list_chapters"}}),
             chapter_schema(true)),
        tool("search_glossary", "Search the glossary",
             "The glossary entries whose term or definition contains the query (case-insensitive); entries "
             "whose term matches come first.",
             string_arguments({{"query", "The text to look for in terms and definitions"}}), std::move(matches)),
        tool("get_section", "Get a section",
             "One section by its slug (from list_chapters or search): its title, status, URLs and the Markdown "
             "source of its text.",
             string_arguments({{"slug", "The section's slug, e.g. prefill-and-decode-disaggregation"}}),
             std::move(section_out)),
        tool("search", "Search the book",
             "The sections and chapter overviews whose text contains the query (case-insensitive), the most "
             "matches first, each with an excerpt around its first match; at most 20.",
             string_arguments({{"query", "The words to look for, as one phrase"}}), std::move(hits)),
    };
}

json::object BookTools::call(std::string_view name, const json::object& arguments) const {
    if (name == "list_chapters") {
        if (!arguments.empty()) throw InvalidParams("list_chapters takes no arguments");
        return list_chapters();
    }
    if (name == "get_chapter") return get_chapter(string_argument(arguments, "slug"));
    if (name == "search_glossary") return search_glossary(string_argument(arguments, "query"));
    if (name == "get_section") return get_section(string_argument(arguments, "slug"));
    if (name == "search") return search(string_argument(arguments, "query"));
    throw InvalidParams("unknown tool \"" + std::string(name) + "\"");
}

json::object BookTools::list_chapters() const {
    json::object listing = chapters_json(book_);
    return success({{"chapters", std::move(listing["chapters"])}});
}

json::object BookTools::get_chapter(const std::string& slug) const {
    const Chapter* chapter = book_.chapter(slug);
    if (!chapter) {
        std::string known;
        for (const Chapter& c : book_.chapters) known += (known.empty() ? "" : ", ") + c.slug;
        return failure("No chapter has the slug \"" + slug + "\". The chapters are: " + known + ".");
    }
    return success(chapter_json(*chapter, true));
}

json::object BookTools::search_glossary(const std::string& query) const {
    const std::string needle = ascii_lower(query);
    json::array by_term, by_definition;
    for (const GlossaryEntry& e : book_.glossary) {
        if (ascii_lower(e.term).find(needle) != std::string::npos) by_term.push_back(glossary_entry_json(e));
        else if (ascii_lower(e.definition).find(needle) != std::string::npos) by_definition.push_back(glossary_entry_json(e));
    }
    for (auto& e : by_definition) by_term.push_back(std::move(e));
    return success({{"query", query}, {"matches", std::move(by_term)}});
}

json::object BookTools::get_section(const std::string& slug) const {
    for (const Chapter& c : book_.chapters)
        for (const Section& s : c.sections) {
            if (s.slug != slug) continue;
            json::object out = section_json(c, s);
            out["chapter"] = c.slug;
            out["markdown"] = s.markdown;
            return success(std::move(out));
        }
    return failure("No section has the slug \"" + slug + "\". list_chapters gives every section's slug.");
}

namespace {

// The matches of `needle` (lowercase) in `text`, and an excerpt of about 240
// characters around the first, cut at spaces and on one line.
std::pair<int64_t, std::string> find_in(const std::string& text, const std::string& needle) {
    const std::string lower = ascii_lower(text);
    int64_t count = 0;
    size_t first = std::string::npos;
    for (size_t at = lower.find(needle); at != std::string::npos; at = lower.find(needle, at + needle.size())) {
        if (first == std::string::npos) first = at;
        ++count;
    }
    if (!count) return {0, ""};
    size_t from = first > 120 ? text.find(' ', first - 120) : 0;
    if (from == std::string::npos || from > first) from = first;
    size_t to = text.find(' ', std::min(text.size(), first + needle.size() + 120));
    if (to == std::string::npos) to = text.size();
    std::string excerpt = text.substr(from, to - from);
    for (char& ch : excerpt)
        if (ch == '\n') ch = ' ';
    return {count, (from > 0 ? "..." : "") + excerpt + (to < text.size() ? "..." : "")};
}

}  // namespace

json::object BookTools::search(const std::string& query) const {
    const std::string needle = ascii_lower(query);
    struct Hit {
        int64_t matches;
        json::object result;
    };
    std::vector<Hit> found;
    auto look = [&](const std::string& chapter, const std::string& slug, const std::string& title,
                    const std::string& url, const std::string& text) {
        auto [count, excerpt] = find_in(text, needle);
        if (count)
            found.push_back({count, {{"chapter", chapter}, {"slug", slug}, {"title", title}, {"url", url},
                                     {"matches", count}, {"excerpt", excerpt}}});
    };
    for (const Chapter& c : book_.chapters) {
        look(c.slug, c.slug, c.title, chapter_path(c), c.markdown);
        for (const Section& s : c.sections) look(c.slug, s.slug, s.title, section_path(c, s), s.markdown);
    }
    std::stable_sort(found.begin(), found.end(), [](const Hit& a, const Hit& b) { return a.matches > b.matches; });
    json::array results;
    for (size_t i = 0; i < found.size() && i < 20; ++i) results.push_back(std::move(found[i].result));
    return success({{"query", query}, {"results", std::move(results)}});
}

}  // namespace minfer::book
