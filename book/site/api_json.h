// The book's structure as JSON, in one shape for the JSON API and the MCP
// tools alike: a chapter with its sections, their pages and Markdown twins.
#pragma once

#include <boost/json.hpp>

#include "book/site/book_index.h"

namespace minfer::book {

// {"number","slug","title","summary","description","url","markdown_url",
//  "sections":[{"slug","title","summary","status","url","markdown_url"}]},
// plus "markdown" (the overview's source) when with_markdown.
boost::json::object chapter_json(const Chapter& chapter, bool with_markdown);

// One of those sections: {"slug","title","summary","status","url","markdown_url"}.
boost::json::object section_json(const Chapter& chapter, const Section& section);

// {"version":"v1","chapters":[chapter_json(c, false)...]}
boost::json::object chapters_json(const Book& book);

// {"id","term","definition","see_also","url":"/chapters/glossary#ID"}
boost::json::object glossary_entry_json(const GlossaryEntry& entry);

}  // namespace minfer::book
