#include "book/site/source_view.h"

#include "book/site/excerpt.h"
#include "book/site/html.h"

namespace minfer::book {

std::string source_view_html(std::string_view path, std::string_view text) {
    if (text.ends_with("\n")) text.remove_suffix(1);
    size_t lines = 1;
    for (char c : text) lines += c == '\n';
    if (text.empty()) lines = 0;
    // Line numbers and code sit in two columns of the same font and line
    // height, so highlight.js can re-color the code without losing the anchors.
    std::string gutter;
    for (size_t i = 1; i <= lines; ++i) {
        const std::string n = std::to_string(i);
        gutter += "<a id=\"L" + n + "\" href=\"#L" + n + "\">" + n + "</a>\n";
    }
    const std::string lang = language_of(path);
    return "<h1 class=\"source-title\"><code>" + html_escape(path) + "</code></h1>\n<p class=\"source-meta\">" +
           std::to_string(lines) + " lines · from the repository this book explains</p>\n" +
           "<div class=\"lk-source\" data-lines=\"" + std::to_string(lines) + "\">\n<pre class=\"lk-gutter\" aria-hidden=\"true\">" +
           gutter + "</pre><pre class=\"lk-code\"><code" + (lang.empty() ? " class=\"language-plaintext\"" : " class=\"language-" + lang + "\"") +
           ">" + html_escape(text) + "\n</code></pre>\n</div>\n";
}

}  // namespace minfer::book
