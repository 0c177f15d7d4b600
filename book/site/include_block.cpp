#include "book/site/include_block.h"

#include "book/site/book_index.h"
#include "book/site/markdown_scan.h"
#include "book/site/trim.h"

namespace minfer::book {

namespace {

bool has_include(std::string_view markdown) {
    for (const MarkdownChunk& chunk : split_fenced_blocks(markdown))
        if (chunk.fenced && chunk.info == "include") return true;
    return false;
}

}  // namespace

std::string expand_includes(std::string_view markdown, const SourceTree& tree) {
    std::string out;
    for (const MarkdownChunk& chunk : split_fenced_blocks(markdown)) {
        if (!chunk.fenced || chunk.info != "include") {
            out += chunk.text;
            continue;
        }
        const std::string path(trim(chunk.body));
        if (path.empty() || path.find('\n') != std::string::npos)
            throw BookError("include block: its only line must be a repository path, got \"" + path + "\"");
        if (!path.ends_with(".md")) throw BookError("include block " + path + ": only Markdown files can be included");
        if (!tree.contains(path)) throw BookError("include block " + path + ": no such file in the repository");
        std::string text = tree.read(path);
        if (has_include(text)) throw BookError("include block " + path + ": the file has include blocks of its own");
        if (!text.empty() && text.back() != '\n') text += '\n';
        out += "\n" + text + "\n*From [" + path + "](/source/" + path + ").*\n\n";
    }
    return out;
}

}  // namespace minfer::book
