#include "book/site/llms.h"

#include "book/site/page_layout.h"

namespace minfer::book {

namespace {

std::string md_link(std::string_view base, std::string_view title, std::string_view path, std::string_view note) {
    return "- [" + std::string(title) + "](" + std::string(base) + PageLayout::markdown_url(path) + "): " +
           std::string(note) + "\n";
}

}  // namespace

std::string llms_txt(const Book& book, std::string_view base_url) {
    const std::string base(base_url);
    std::string t = "# " + book.title + "\n\n> " + book.summary + "\n\n";
    t += "Every page of this book is also available as Markdown: add `.md` to its URL (the home page is " + base +
         "/index.md). The whole book as one document is " + base + "/llms-full.txt.\n";
    for (const Chapter& c : book.chapters) {
        t += "\n## " + std::to_string(c.number) + ". " + c.title + "\n\n" + c.summary + "\n\n" + c.description + "\n\n";
        t += md_link(base, "Overview", chapter_path(c), "the chapter's overview and how its sections fit together");
        for (const Section& s : c.sections)
            t += md_link(base, s.title, section_path(c, s), s.written ? s.summary : s.summary + " (in preparation)");
    }
    t += "\n## Reference\n\n";
    t += md_link(base, "Glossary", "/chapters/glossary", "every term the book uses, with its definition");
    t += md_link(base, "Further reading", "/chapters/reading", "papers, posts and code worth reading next, by topic");
    t += "\n## For developers and agents\n\n";
    t += md_link(base, "Developers", "/developers", "the book's API, its MCP server and how to build the site");
    t += "- [Chapters API](" + base + "/api/v1/chapters): the book's structure as JSON\n";
    t += "- [OpenAPI document](" + base + "/openapi.json): the API's OpenAPI 3.1 description\n";
    t += "- [MCP server](" + base + "/api/mcp): the book as Model Context Protocol tools (streamable HTTP)\n";
    t += "- [llms-full.txt](" + base + "/llms-full.txt): the whole book in one Markdown document\n";
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
