#include "book/site/llms.h"

#include "book/site/page_layout.h"

namespace minfer::book {

namespace {

std::string link(std::string_view base, std::string_view title, std::string_view path, std::string_view note) {
    return "- [" + std::string(title) + "](" + std::string(base) + std::string(path) + "): " + std::string(note) + "\n";
}

}  // namespace

// In the shape of the seed the book was planned from (../shared/seed/llms.txt):
// one H2 per chapter with its blurb and its pages (the overview, then "N.M
// Title": "Section N.M."), the glossary and the further-reading groups (B.1
// ...) as chapters of their own, the reference pages, and the entry points for
// programs. Links go to the pages; each page's Markdown is its URL + ".md".
std::string llms_txt(const Book& book, std::string_view base_url) {
    const std::vector<ReadingGroup>& reading_groups = book.reading_groups;
    const std::string base(base_url);
    std::string t = "# " + book.title + "\n\n> " + book.summary +
                    " Every page is available as Markdown by appending `.md` to its URL. The whole book as one "
                    "document is at " + base + "/llms-full.txt. Figures are interactive. In the Markdown they appear "
                    "as a titled placeholder with a link, because what they teach is the response to input, which "
                    "does not survive being written down.\n";
    for (const Chapter& c : book.chapters) {
        t += "\n## " + std::to_string(c.number) + ". " + c.title + "\n\n" + c.summary + " " + c.description + "\n\n";
        t += link(base, c.title, chapter_path(c), "chapter overview");
        for (size_t i = 0; i < c.sections.size(); ++i) {
            const std::string number = std::to_string(c.number) + "." + std::to_string(i + 1);
            t += link(base, number + " " + c.sections[i].title, section_path(c, c.sections[i]),
                      "Section " + number + ".");
        }
    }
    t += "\n## Glossary\n\nEvery term, defined once. A searchable reference for the vocabulary of the book. Entries "
         "live in book/content/glossary.json.\n\n";
    t += link(base, "Glossary", "/chapters/glossary", "chapter overview");
    t += "\n## Further reading\n\nThe papers, guides, and repositories worth your time. Primary sources on GPU "
         "performance engineering, grouped from a single inference request down to a single kernel and back out to "
         "distributed serving. Entries live in book/content/reading.json and the groups in "
         "book/content/reading_groups.json.\n\n";
    t += link(base, "Further reading", "/chapters/reading", "chapter overview");
    for (size_t i = 0; i < reading_groups.size(); ++i) {
        const std::string number = "B." + std::to_string(i + 1);
        t += link(base, number + " " + reading_groups[i].title, "/chapters/reading#" + reading_groups[i].id,
                  "Section " + number + ".");
    }
    t += "\n## Reference\n";
    t += link(base, "Glossary", "/chapters/glossary", "every term of art, defined once");
    t += link(base, "Further reading", "/chapters/reading", "the sources behind the book");
    t += link(base, "About", "/about", "what this site is");
    t += link(base, "Privacy", "/privacy", "what is collected, what Ask AI sends, and what is not");
    t += "\n## For developers and agents\n\n" + book.title +
         " also publishes its chapter and section index as JSON, for programs that would rather not scrape HTML or "
         "Markdown. The API is versioned, rate-limited, keyless, and its errors are JSON: see the developer page for "
         "the details.\n\n";
    t += link(base, "Developer resources", "/developers", "quickstart, errors, versioning, rate limits");
    t += link(base, "OpenAPI spec", "/openapi.json", "the JSON API described machine-readably");
    t += link(base, "GET /api/v1/chapters", "/api/v1/chapters", "every chapter, as JSON");
    const std::string first = book.chapters.empty() ? "introduction" : book.chapters.front().slug;
    t += link(base, "GET /api/v1/chapters/{slug}", "/api/v1/chapters/" + first, "one chapter and its sections, as JSON");
    t += link(base, "MCP server", "/api/mcp", "the same chapter index as MCP tools, for MCP-native clients");
    return t;
}

std::string llms_full_txt(const Book& book, const std::vector<std::pair<std::string, std::string>>& documents,
                          std::string_view base_url) {
    const std::string base(base_url);
    std::string t = "# " + book.title + "\n\n> " + book.summary + "\n\n";
    for (const auto& [path, markdown] : documents) {
        t += "---\n\n<!-- " + base + PageLayout::markdown_url(path) + " -->\n\n";
        // Site-relative links become absolute, so the document stands on its own.
        std::string body;
        size_t pos = 0;
        while (true) {
            const size_t at = markdown.find("](/", pos);
            if (at == std::string::npos) break;
            body.append(markdown, pos, at + 2 - pos);
            body += base;
            pos = at + 2;
        }
        body.append(markdown, pos);
        t += body;
        if (!body.ends_with("\n")) t += "\n";
        t += "\n";
    }
    return t;
}

}  // namespace minfer::book
