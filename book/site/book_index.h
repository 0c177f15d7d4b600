// The book as data: chapters and sections (book/content/book.json and the
// Markdown files beside it), the glossary and the reading list. The site, the
// JSON API, llms.txt and the MCP server all read this one index.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace minfer::book {

struct BookError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct Section {
    std::string slug, title, summary;
    bool written = false;   // false: an outline, marked "in preparation"
    std::string markdown;   // the source text (book/content/CHAPTER/SECTION.md)
};

struct Chapter {
    int number = 0;
    std::string slug, title, summary, description;
    std::string markdown;   // the overview (book/content/CHAPTER/index.md)
    std::vector<Section> sections;
};

struct GlossaryEntry {
    std::string id;          // the anchor: /chapters/glossary#ID
    std::string term, definition;
    std::vector<std::string> see_also;  // other entries' ids
};

struct ReadingGroup {
    std::string id, title, description;  // id: the anchor on /chapters/reading
};

struct ReadingEntry {
    std::string group, title, authors, url, note;
    int year = 0;
};

// A page outside the chapters: about, privacy, developers (book/content/pages/NAME.md).
struct Page {
    std::string slug, title, markdown;
};

struct Book {
    std::filesystem::path root;  // the repository root (source links resolve against it)
    std::string title, subtitle, summary;
    std::vector<Chapter> chapters;
    std::vector<GlossaryEntry> glossary;
    std::vector<ReadingGroup> reading_groups;
    std::vector<ReadingEntry> reading;
    std::vector<Page> pages;

    const Chapter* chapter(std::string_view slug) const;
    const Section* section(std::string_view chapter_slug, std::string_view section_slug) const;
};

// Reads ROOT/book/content. Throws BookError naming the file and what is wrong
// (missing Markdown, duplicate slug, unknown reading group, glossary see_also to
// no entry, ...).
Book load_book(const std::filesystem::path& repo_root);

// The whole file as text; BookError if it cannot be read.
std::string read_text_file(const std::filesystem::path& p);

// Site paths (no host): /chapters/SLUG, /chapters/SLUG/SECTION.
std::string chapter_path(const Chapter& c);
std::string section_path(const Chapter& c, const Section& s);

}  // namespace minfer::book
