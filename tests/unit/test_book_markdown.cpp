// The book's Markdown pieces: math kept away from cmark, code left alone,
// figure blocks, and whole-page rendering with src:, glossary: and page links.
#include <doctest/doctest.h>

#include "book/site/heading_ids.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>

#include "book/site/book_index.h"
#include "book/site/figure_block.h"
#include "book/site/markdown.h"
#include "book/site/markdown_scan.h"
#include "book/site/math.h"
#include "book_test_repo.h"

using namespace minfer::book;
using minfer::book_test::TempRepo;
namespace fs = std::filesystem;

namespace {

// A throwaway repository with one C++ file, for links to resolve against.
struct TinyRepo : TempRepo {
    TinyRepo()
        : TempRepo("minfer_book_md", {{"src/pool.h", "#pragma once\n"
                                                     "struct Pool {\n"
                                                     "    int size() const { return n; }\n"
                                                     "    int n = 0;\n"
                                                     "};\n"
                                                     "\n"
                                                     "int grow(int by) {\n"
                                                     "    return by * 2;\n"
                                                     "}\n"}}) {}
};

// Each of parts stands somewhere in text.
void check_has(const std::string& text, std::initializer_list<const char*> parts) {
    for (const char* part : parts)
        CHECK_MESSAGE(text.find(part) != std::string::npos, "missing: " << std::string(part));
}

RenderedMarkdown render(const std::string& md, TinyRepo& repo) {
    SourceTree tree(repo.root, {"src/pool.h"});
    SymbolIndex symbols(tree);
    LinkContext links{symbols, {"kv-cache"}, {"/", "/chapters/foundations", "/chapters/glossary"}};
    return render_markdown(md, "test.md", links);
}

}  // namespace

TEST_CASE("book: math: inline and display formulas become placeholders, code does not") {
    const ProtectedMath m = protect_math("Cost $a_i * b_i$ and `$x$` here.\n\n$$\nE = mc^2\n$$\n\n```\n$y$\n```\n");
    REQUIRE(m.formulas.size() == 2);
    CHECK(m.formulas[0] == "$a_i * b_i$");
    CHECK_FALSE(m.display[0]);
    CHECK(m.formulas[1] == "$$\nE = mc^2\n$$");
    CHECK(m.display[1]);
    CHECK(m.text.find("`$x$`") != std::string::npos);     // a code span keeps its dollars
    CHECK(m.text.find("```\n$y$\n```") != std::string::npos);  // so does a fenced block
    CHECK(m.text.find("a_i") == std::string::npos);        // cmark never sees the TeX
}

TEST_CASE("book: math: prices, escaped dollars and unclosed dollars stay text") {
    CHECK(protect_math("It costs $5 and $10.").formulas.empty());  // closing $ followed by a digit
    CHECK(protect_math("a \\$ sign and $ alone").formulas.empty());
    CHECK(protect_math("$x\n\ny$").formulas.empty());  // a formula does not cross a paragraph
}

TEST_CASE("book: math: restored formulas are escaped; a lone display formula gets a div") {
    const ProtectedMath m = protect_math("$a<b$\n\n$$x$$\n");
    const std::string html = restore_math("<p>" + std::string("LKMATH0X") + "</p>\n<p>LKMATH1X</p>\n", m);
    CHECK(html == "<p><span class=\"math math-inline\">$a&lt;b$</span></p>\n<div class=\"math math-display\">$$x$$</div>\n");
}

TEST_CASE("book: math survives cmark: emphasis characters inside TeX are not Markdown") {
    TinyRepo repo;
    const RenderedMarkdown r = render("Sum $a_i * b_i * c_i$ done.\n", repo);
    CHECK(r.html.find("<em>") == std::string::npos);
    CHECK(r.html.find("<span class=\"math math-inline\">$a_i * b_i * c_i$</span>") != std::string::npos);
    CHECK(r.markdown == "Sum $a_i * b_i * c_i$ done.\n");  // the twin keeps the TeX as written
}

TEST_CASE("book: fenced blocks split from prose and join back to the input") {
    const std::string md = "text\n```cpp\nint x;\n```\nmore `code` text\n~~~~figure\nid: a\n~~~~\n";
    const auto chunks = split_fenced_blocks(md);
    REQUIRE(chunks.size() == 4);
    CHECK(chunks[1].fenced);
    CHECK(chunks[1].info == "cpp");
    CHECK(chunks[1].body == "int x;\n");
    CHECK(chunks[3].info == "figure");
    std::string joined;
    for (const auto& c : chunks) joined += c.text;
    CHECK(joined == md);
    CHECK(skip_code_span("``a ` b`` c", 0) == 9);
    CHECK(skip_code_span("`open", 0) == 0);
}

TEST_CASE("book: figure blocks: id, title, caption and options") {
    const FigureSpec f = parse_figure_block("id: roofline\ntitle: The H200 roofline\ncaption: Drag it.\npreset: llama3-8b\n"
                                            "batch: 64\nlog: true\n");
    CHECK(f.id == "roofline");
    CHECK(f.title == "The H200 roofline");
    CHECK(f.caption == "Drag it.");
    CHECK(f.options_json() == R"({"batch":64,"log":true,"preset":"llama3-8b"})");
    const std::string html = figure_html(f);
    check_has(html, {
        "<figure class=\"lk-figure\"",
        "data-figure=\"roofline\"",
        "<noscript>",
    });
    CHECK(figure_markdown(f).find("](/figures/roofline)") != std::string::npos);

    CHECK_THROWS_AS(parse_figure_block("title: no id\n"), BookError);
    CHECK_THROWS_AS(parse_figure_block("id: x\n"), BookError);  // no title
    CHECK_THROWS_AS(parse_figure_block("id: Bad_Id\ntitle: t\n"), BookError);
    CHECK_THROWS_AS(parse_figure_block("id: x\ntitle: t\njust words\n"), BookError);
    CHECK_THROWS_AS(parse_figure_block("id: x\nid: y\ntitle: t\n"), BookError);
}

TEST_CASE("book: pages: src links become source-view ranges in the HTML and the twin") {
    TinyRepo repo;
    const RenderedMarkdown r = render("See [the pool](src:src/pool.h#Pool), [grow](src:src/pool.h#grow) and "
                                      "[the file](src:src/pool.h). Not `[x](src:nowhere.h)`.\n",
                                      repo);
    check_has(r.html, {
        "href=\"/source/src/pool.h#L2-L5\"",
        "href=\"/source/src/pool.h#L7-L9\"",
        "href=\"/source/src/pool.h\"",
    });
    check_has(r.markdown, {
        "](/source/src/pool.h#L2-L5)",
        "`[x](src:nowhere.h)`",  // code is not a link
    });
    CHECK(r.sources.size() == 3);
}

TEST_CASE("book: pages: headings get anchors, unique within the page") {
    TinyRepo repo;
    const RenderedMarkdown r = render("# The `KV` cache\n\n## How big, really?\n\n## How big, really?\n", repo);
    check_has(r.html, {
        "<h1 id=\"the-kv-cache\">",
        "<h2 id=\"how-big-really\">",
        "<h2 id=\"how-big-really-2\">",
    });
}

TEST_CASE("book: pages: h2-h4 carry a permalink; the outline lists h2 and h3 with their text") {
    TinyRepo repo;
    const RenderedMarkdown r =
        render("# Title\n\n## One *a* & b\n\n### Inner\n\n#### Deep\n\n## Two\n", repo);
    check_has(r.html, {
        "<h1 id=\"title\">Title</h1>",
        "<h2 id=\"one-a-b\">One <em>a</em> &amp; b<a class=\"permalink\" href=\"#one-a-b\" aria-label=\"Link to this heading\">#</a></h2>",
        "<h4 id=\"deep\">Deep<a class=\"permalink\" href=\"#deep\"",
    });
    const std::vector<Heading> outline = page_outline(r.html);
    REQUIRE(outline.size() == 3);
    CHECK(outline[0].level == 2);
    CHECK(outline[0].id == "one-a-b");
    CHECK(outline[0].text == "One a &amp; b");
    CHECK(outline[1].level == 3);
    CHECK(outline[1].id == "inner");
    CHECK(outline[2].text == "Two");
}

TEST_CASE("book: pages: footnotes carry citations to the end of the page, and back") {
    TinyRepo repo;
    const RenderedMarkdown r = render("A claim.[^zhong]\n\n[^zhong]: Zhong et al., [DistServe](https://arxiv.org/abs/2401.09670).\n",
                                      repo);
    check_has(r.html, {
        "href=\"#fn-zhong\"",
        "id=\"fn-zhong\"",
        "href=\"https://arxiv.org/abs/2401.09670\"",
        "href=\"#fnref-zhong\"",
    });
    CHECK(r.markdown.find("[^zhong]: Zhong et al.") != std::string::npos);  // the twin keeps Markdown's own syntax
}

TEST_CASE("book: pages: reference-style links are resolved in the twin too") {
    TinyRepo repo;
    const RenderedMarkdown r = render("See [the pool][p].\n\n[p]: src:src/pool.h#Pool\n", repo);
    CHECK(r.html.find("href=\"/source/src/pool.h#L2-L5\"") != std::string::npos);
    CHECK(r.markdown.find("[p]: /source/src/pool.h#L2-L5") != std::string::npos);
}

TEST_CASE("book: pages: an excerpt block shows the symbol's lines with a caption") {
    TinyRepo repo;
    const RenderedMarkdown r = render("```excerpt\nsrc:src/pool.h#grow\n```\n", repo);
    check_has(r.html, {
        "<figure class=\"lk-excerpt\">",
        "int grow(int by) {\n    return by * 2;\n}",
        "href=\"/source/src/pool.h#L7-L9\"",
    });
    CHECK(r.markdown.find("```cpp\nint grow(int by) {") != std::string::npos);
}

TEST_CASE("book: pages: glossary and page links are checked; broken ones name the page and the link") {
    TinyRepo repo;
    CHECK(render("[KV](glossary:kv-cache)\n", repo).html.find("href=\"/chapters/glossary#kv-cache\"") != std::string::npos);
    CHECK(render("[ok](/chapters/foundations#x) [md](/chapters/foundations.md)\n", repo).html.size() > 0);
    const auto error_of = [&](const std::string& md) {
        try {
            render(md, repo);
        } catch (const BookError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    CHECK(error_of("[x](glossary:nope)") == "test.md: glossary:nope: no glossary entry with that id");
    CHECK(error_of("[x](/chapters/missing)").starts_with("test.md: /chapters/missing: no such page"));
    CHECK(error_of("[x](/chapters/glossary#nope)").find("no glossary entry") != std::string::npos);
    CHECK(error_of("[x](src:src/other.h#Pool)").find("no file src/other.h") != std::string::npos);
    CHECK(error_of("[x](src:src/pool.h#Missing)").find("no symbol Missing") != std::string::npos);
    CHECK(error_of("```excerpt\nsrc:src/pool.h\n```\n").find("name a symbol") != std::string::npos);
    CHECK(error_of("```figure\nid: x\n```\n").find("test.md: figure block x: it has no title") == 0);
}

TEST_CASE("book: pages: an include block shows a Markdown file of the repository, table and link") {
    TinyRepo repo;
    fs::create_directories(repo.root / "bench");
    std::ofstream(repo.root / "bench" / "TABLE.md") << "Measured today.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n";
    std::ofstream(repo.root / "bench" / "nested.md") << "```include\nbench/TABLE.md\n```\n";
    std::ofstream(repo.root / "bench" / "notes.txt") << "plain\n";
    SourceTree tree(repo.root, {"src/pool.h", "bench/TABLE.md", "bench/nested.md", "bench/notes.txt"});
    SymbolIndex symbols(tree);
    LinkContext links{symbols, {}, {"/"}};
    const RenderedMarkdown r = render_markdown("Before.\n```include\nbench/TABLE.md\n```\nAfter.\n", "p.md", links);
    check_has(r.html, {
        "<table>",
        "<td>2</td>",
        "href=\"/source/bench/TABLE.md\"",
        "<p>After.</p>",
    });
    check_has(r.markdown, {
        "| 1 | 2 |",
        "[bench/TABLE.md](/source/bench/TABLE.md)",
    });
    CHECK(r.markdown.find("```include") == std::string::npos);

    const auto error_of = [&](const std::string& md) {
        try {
            render_markdown(md, "p.md", links);
        } catch (const BookError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    CHECK(error_of("```include\nbench/MISSING.md\n```\n") == "p.md: include block bench/MISSING.md: no such file in the repository");
    CHECK(error_of("```include\nbench/notes.txt\n```\n").find("only Markdown files") != std::string::npos);
    CHECK(error_of("```include\nbench/nested.md\n```\n").find("include blocks of its own") != std::string::npos);
    CHECK(error_of("```include\n```\n").find("its only line must be a repository path") != std::string::npos);
    CHECK(error_of("```include\nbench/TABLE.md\nbench/TABLE.md\n```\n").find("its only line") != std::string::npos);
}
