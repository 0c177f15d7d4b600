#include "book/site/api_json.h"

namespace minfer::book {

namespace json = boost::json;

json::object section_json(const Chapter& chapter, const Section& s) {
    const std::string url = section_path(chapter, s);
    return {
        {"slug", s.slug},
        {"title", s.title},
        {"summary", s.summary},
        {"status", s.written ? "written" : "in-preparation"},
        {"url", url},
        {"markdown_url", url + ".md"},
    };
}

json::object chapter_json(const Chapter& chapter, bool with_markdown) {
    json::array sections;
    for (const Section& s : chapter.sections) sections.push_back(section_json(chapter, s));
    const std::string url = chapter_path(chapter);
    json::object out{
        {"number", chapter.number},
        {"slug", chapter.slug},
        {"title", chapter.title},
        {"summary", chapter.summary},
        {"description", chapter.description},
        {"url", url},
        {"markdown_url", url + ".md"},
        {"sections", std::move(sections)},
    };
    if (with_markdown) out["markdown"] = chapter.markdown;
    return out;
}

json::object chapters_json(const Book& book) {
    json::array chapters;
    for (const Chapter& c : book.chapters) chapters.push_back(chapter_json(c, false));
    return {{"version", "v1"}, {"chapters", std::move(chapters)}};
}

json::object glossary_entry_json(const GlossaryEntry& entry) {
    json::array see_also;
    for (const std::string& id : entry.see_also) see_also.push_back(json::string(id));
    return {
        {"id", entry.id},
        {"term", entry.term},
        {"definition", entry.definition},
        {"see_also", std::move(see_also)},
        {"url", "/chapters/glossary#" + entry.id},
    };
}

}  // namespace minfer::book
