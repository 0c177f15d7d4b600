#include "book/site/markdown_scan.h"

namespace minfer::book {

namespace {

// A fence line: up to 3 spaces, then 3+ backticks or tildes.
bool fence_open(std::string_view line, char& ch, size_t& len, std::string& info) {
    size_t i = 0;
    while (i < line.size() && i < 3 && line[i] == ' ') ++i;
    if (i >= line.size() || (line[i] != '`' && line[i] != '~')) return false;
    ch = line[i];
    size_t j = i;
    while (j < line.size() && line[j] == ch) ++j;
    len = j - i;
    if (len < 3) return false;
    std::string_view rest = line.substr(j);
    if (ch == '`' && rest.find('`') != std::string_view::npos) return false;  // that is a code span
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
    while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t' || rest.back() == '\r')) rest.remove_suffix(1);
    const size_t space = rest.find_first_of(" \t");  // "cpp title=x": the language is the first word
    info = std::string(rest.substr(0, space));
    return true;
}

bool fence_close(std::string_view line, char ch, size_t len) {
    size_t i = 0;
    while (i < line.size() && i < 3 && line[i] == ' ') ++i;
    size_t j = i;
    while (j < line.size() && line[j] == ch) ++j;
    if (j - i < len) return false;
    for (; j < line.size(); ++j)
        if (line[j] != ' ' && line[j] != '\t' && line[j] != '\r') return false;
    return true;
}

}  // namespace

std::vector<MarkdownChunk> split_fenced_blocks(std::string_view markdown) {
    std::vector<MarkdownChunk> chunks;
    MarkdownChunk prose;
    MarkdownChunk* open = nullptr;
    MarkdownChunk block;
    char ch = 0;
    size_t len = 0;
    size_t pos = 0;
    while (pos < markdown.size()) {
        const size_t nl = markdown.find('\n', pos);
        const size_t end = nl == std::string_view::npos ? markdown.size() : nl + 1;
        const std::string_view line_nl = markdown.substr(pos, end - pos);
        std::string_view line = line_nl;
        if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
        pos = end;
        if (open) {
            block.text += line_nl;
            if (fence_close(line, ch, len)) {
                chunks.push_back(std::move(block));
                block = {};
                open = nullptr;
            } else {
                block.body += line_nl;
            }
            continue;
        }
        std::string info;
        if (fence_open(line, ch, len, info)) {
            if (!prose.text.empty()) chunks.push_back(std::move(prose));
            prose = {};
            block = {};
            block.fenced = true;
            block.info = info;
            block.text = std::string(line_nl);
            open = &block;
            continue;
        }
        prose.text += line_nl;
    }
    if (open) chunks.push_back(std::move(block));
    if (!prose.text.empty()) chunks.push_back(std::move(prose));
    return chunks;
}

size_t skip_code_span(std::string_view text, size_t i) {
    if (i >= text.size() || text[i] != '`') return i;
    size_t run = 0;
    while (i + run < text.size() && text[i + run] == '`') ++run;
    size_t j = i + run;
    while (j < text.size()) {
        const size_t next = text.find('`', j);
        if (next == std::string_view::npos) return i;
        size_t r = 0;
        while (next + r < text.size() && text[next + r] == '`') ++r;
        if (r == run) return next + r;
        j = next + r;
    }
    return i;
}

}  // namespace minfer::book
