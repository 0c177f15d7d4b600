#include "book/site/trim.h"
#include "book/site/markdown.h"

#include <cmark-gfm-core-extensions.h>
#include <cmark-gfm.h>

#include <algorithm>
#include <memory>

#include "book/site/book_index.h"
#include "book/site/excerpt.h"
#include "book/site/heading_ids.h"
#include "book/site/include_block.h"
#include "book/site/markdown_scan.h"
#include "book/site/math.h"

namespace minfer::book {

namespace {

struct ParserFree {
    void operator()(cmark_parser* p) const { cmark_parser_free(p); }
};
struct NodeFree {
    void operator()(cmark_node* n) const { cmark_node_free(n); }
};
struct IterFree {
    void operator()(cmark_iter* i) const { cmark_iter_free(i); }
};


std::string first_word(const char* info) {
    const std::string_view s = trim(info ? info : "");
    return std::string(s.substr(0, s.find_first_of(" \t")));
}

// A reference definition line ("[label]: target"): where its target starts, or npos.
size_t reference_target(std::string_view text, size_t line_start) {
    size_t i = line_start;
    while (i < text.size() && i - line_start < 3 && text[i] == ' ') ++i;
    if (i >= text.size() || text[i] != '[') return std::string_view::npos;
    const size_t close = text.find("]:", i);
    const size_t eol = text.find('\n', i);
    if (close == std::string_view::npos || close > eol) return std::string_view::npos;
    size_t t = close + 2;
    while (t < text.size() && text[t] == ' ') ++t;
    return t;
}

// The twin's prose: every link destination (inline, or in a reference
// definition) through resolve_link, code spans untouched.
std::string rewrite_prose_links(std::string_view text, LinkContext& links) {
    std::string out;
    size_t i = 0;
    while (i < text.size()) {
        if (i == 0 || text[i - 1] == '\n') {
            const size_t t = reference_target(text, i);
            if (t != std::string_view::npos) {
                const size_t end = std::min(text.find_first_of(" \n", t), text.size());
                out.append(text.substr(i, t - i));
                out += resolve_link(text.substr(t, end - t), links);
                i = end;
                continue;
            }
        }
        const size_t after_code = skip_code_span(text, i);
        if (after_code != i) {
            out.append(text.substr(i, after_code - i));
            i = after_code;
            continue;
        }
        if (text.substr(i, 2) != "](") {
            out.push_back(text[i++]);
            continue;
        }
        const size_t start = i + 2;
        const size_t close = text.find_first_of(") \n", start);
        if (close == std::string_view::npos) {
            out.append(text.substr(i));
            break;
        }
        out += "](" + resolve_link(text.substr(start, close - start), links);
        i = close;
    }
    return out;
}

void render_html(std::string_view markdown, LinkContext& links, RenderedMarkdown& out) {
    cmark_gfm_core_extensions_ensure_registered();
    const ProtectedMath math = protect_math(markdown);
    // Footnotes ([^1] ... [^1]: source) carry a section's citations out of its sentences.
    std::unique_ptr<cmark_parser, ParserFree> parser(cmark_parser_new(CMARK_OPT_DEFAULT | CMARK_OPT_FOOTNOTES));
    for (const char* name : {"table", "strikethrough", "autolink"})
        if (cmark_syntax_extension* ext = cmark_find_syntax_extension(name))
            cmark_parser_attach_syntax_extension(parser.get(), ext);
    cmark_parser_feed(parser.get(), math.text.data(), math.text.size());
    std::unique_ptr<cmark_node, NodeFree> doc(cmark_parser_finish(parser.get()));

    // Links are rewritten in place; blocks are swapped once the walk is over.
    std::vector<std::pair<cmark_node*, std::string>> replacements;
    {
        std::unique_ptr<cmark_iter, IterFree> it(cmark_iter_new(doc.get()));
        cmark_event_type ev;
        while ((ev = cmark_iter_next(it.get())) != CMARK_EVENT_DONE) {
            if (ev != CMARK_EVENT_ENTER) continue;
            cmark_node* node = cmark_iter_get_node(it.get());
            const cmark_node_type type = cmark_node_get_type(node);
            if (type == CMARK_NODE_LINK) {
                const char* url = cmark_node_get_url(node);
                const std::string_view target = url ? url : "";
                if (target.starts_with("src:")) out.sources.push_back(links.symbols.resolve(target.substr(4)));
                cmark_node_set_url(node, resolve_link(target, links).c_str());
            } else if (type == CMARK_NODE_CODE_BLOCK) {
                const std::string info = first_word(cmark_node_get_fence_info(node));
                const char* body = cmark_node_get_literal(node);
                if (info == "excerpt") {
                    const SourceTarget t = excerpt_target(body ? body : "", links.symbols);
                    out.sources.push_back(t);
                    replacements.emplace_back(node, excerpt_html(t, links.symbols.tree()));
                } else if (info == "figure") {
                    FigureSpec f = parse_figure_block(body ? body : "");
                    replacements.emplace_back(node, figure_html(f));
                    out.figures.push_back(std::move(f));
                }
            }
        }
    }
    for (auto& [node, html] : replacements) {
        cmark_node* block = cmark_node_new(CMARK_NODE_HTML_BLOCK);
        cmark_node_set_literal(block, html.c_str());
        cmark_node_replace(node, block);
        cmark_node_free(node);
    }
    // UNSAFE: the book's own HTML blocks (figures, excerpts) must pass through.
    char* html = cmark_render_html(doc.get(), CMARK_OPT_UNSAFE | CMARK_OPT_FOOTNOTES,
                                   cmark_parser_get_syntax_extensions(parser.get()));
    out.html = add_heading_ids(restore_math(html, math));
    cmark_get_default_mem_allocator()->free(html);
}

void render_twin(std::string_view markdown, LinkContext& links, RenderedMarkdown& out) {
    for (const MarkdownChunk& chunk : split_fenced_blocks(markdown)) {
        if (!chunk.fenced) out.markdown += rewrite_prose_links(chunk.text, links);
        else if (chunk.info == "excerpt") out.markdown += excerpt_markdown(excerpt_target(chunk.body, links.symbols), links.symbols.tree());
        else if (chunk.info == "figure") out.markdown += figure_markdown(parse_figure_block(chunk.body));
        else out.markdown += chunk.text;
    }
}

}  // namespace

std::string resolve_link(std::string_view target, LinkContext& links) {
    if (target.starts_with("src:")) return links.symbols.resolve(target.substr(4)).url();
    if (target.starts_with("glossary:")) {
        const std::string id(target.substr(9));
        if (!links.glossary_ids.count(id)) throw BookError("glossary:" + id + ": no glossary entry with that id");
        return "/chapters/glossary#" + id;
    }
    if (target.starts_with("/chapters/") || target == "/chapters") {
        std::string_view path = target.substr(0, target.find_first_of("#?"));
        if (path.ends_with(".md")) path.remove_suffix(3);
        if (!links.page_paths.count(std::string(path)))
            throw BookError(std::string(target) + ": no such page in the book");
        const size_t hash = target.find('#');
        if (path == "/chapters/glossary" && hash != std::string_view::npos &&
            !links.glossary_ids.count(std::string(target.substr(hash + 1))))
            throw BookError(std::string(target) + ": no glossary entry with that id");
    }
    if (target.starts_with("/source/")) {
        const std::string_view path = target.substr(8, target.find_first_of("#?") - 8);
        if (!links.symbols.tree().lookup(path)) throw BookError(std::string(target) + ": no such file in the repository");
    }
    return std::string(target);
}

RenderedMarkdown render_markdown(std::string_view markdown, std::string_view page, LinkContext& links) {
    RenderedMarkdown out;
    try {
        const std::string expanded = expand_includes(markdown, links.symbols.tree());
        render_html(expanded, links, out);
        render_twin(expanded, links, out);
    } catch (const BookError& e) {
        throw BookError(std::string(page) + ": " + e.what());
    }
    return out;
}

}  // namespace minfer::book
