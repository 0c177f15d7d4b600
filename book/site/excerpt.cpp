#include "book/site/trim.h"
#include "book/site/excerpt.h"

#include <algorithm>

#include "book/site/book_index.h"
#include "book/site/html.h"

namespace minfer::book {

namespace {


// The excerpt's lines, without the final newline.
std::string excerpt_lines(const SourceTarget& t, const SourceTree& tree) {
    const std::string text = tree.read(t.path);
    std::string out;
    int line = 1;
    size_t pos = 0;
    while (pos < text.size() && line <= t.last_line) {
        const size_t nl = text.find('\n', pos);
        const size_t end = nl == std::string::npos ? text.size() : nl + 1;
        if (line >= t.first_line) out.append(text, pos, end - pos);
        pos = end;
        ++line;
    }
    if (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}

std::string excerpt_caption(const SourceTarget& t) {
    return t.path + ", lines " + std::to_string(t.first_line) + "–" + std::to_string(t.last_line);
}

}  // namespace

SourceTarget excerpt_target(std::string_view body, SymbolIndex& symbols) {
    const std::string_view line = trim(body);
    if (!line.starts_with("src:") || line.find('\n') != std::string_view::npos)
        throw BookError("excerpt block: its only line must be a src:PATH#Symbol target, got \"" + std::string(line) +
                        "\"");
    SourceTarget t = symbols.resolve(line.substr(4));
    if (t.first_line == 0) throw BookError("excerpt block " + std::string(line) + ": name a symbol, not a whole file");
    return t;
}

std::string excerpt_html(const SourceTarget& t, const SourceTree& tree) {
    const std::string lang = language_of(t.path);
    return "<figure class=\"lk-excerpt\">\n<pre data-first-line=\"" + std::to_string(t.first_line) + "\"><code" +
           (lang.empty() ? "" : " class=\"language-" + lang + "\"") + ">" + html_escape(excerpt_lines(t, tree)) +
           "\n</code></pre>\n<figcaption><a href=\"" + html_escape(t.url()) + "\">" +
           html_escape(excerpt_caption(t)) + "</a> · <code>" + html_escape(t.symbol) +
           "</code></figcaption>\n</figure>\n";
}

std::string excerpt_markdown(const SourceTarget& t, const SourceTree& tree) {
    const std::string code = excerpt_lines(t, tree);
    // The fence must be longer than any run of backticks inside.
    size_t longest = 0, run = 0;
    for (char c : code) {
        run = c == '`' ? run + 1 : 0;
        longest = std::max(longest, run);
    }
    const std::string fence(std::max<size_t>(3, longest + 1), '`');
    return fence + language_of(t.path) + "\n" + code + "\n" + fence + "\n\n[" + excerpt_caption(t) + "](" + t.url() +
           ")\n";
}

std::string language_of(std::string_view path) {
    const std::string_view name = path.substr(path.rfind('/') == std::string_view::npos ? 0 : path.rfind('/') + 1);
    if (name == "CMakeLists.txt" || name.ends_with(".cmake")) return "cmake";
    const size_t dot = name.rfind('.');
    if (dot == std::string_view::npos) return "";
    const std::string_view ext = name.substr(dot + 1);
    if (ext == "h" || ext == "hpp" || ext == "cpp" || ext == "cc" || ext == "cu" || ext == "cuh") return "cpp";
    if (ext == "sh") return "bash";
    if (ext == "py") return "python";
    if (ext == "json") return "json";
    if (ext == "md") return "markdown";
    if (ext == "js") return "javascript";
    if (ext == "css") return "css";
    if (ext == "yml" || ext == "yaml") return "yaml";
    return "";
}

}  // namespace minfer::book
