#include "book/site/math.h"

#include <cctype>

#include "book/site/html.h"
#include "book/site/markdown_scan.h"

namespace minfer::book {

namespace {

std::string placeholder(size_t n) { return "LKMATH" + std::to_string(n) + "X"; }

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The index of the `$` closing an inline formula opened at `open`, or npos.
size_t inline_close(std::string_view text, size_t open) {
    if (open + 1 >= text.size() || is_space(text[open + 1]) || text[open + 1] == '$') return std::string_view::npos;
    for (size_t j = open + 1; j < text.size(); ++j) {
        if (text[j] == '\\') {
            ++j;
            continue;
        }
        if (text[j] == '\n') {  // a blank line ends the paragraph, and any formula with it
            const size_t next = text.find('\n', j + 1);
            const std::string_view line = text.substr(j + 1, next == std::string_view::npos ? next : next - j - 1);
            if (line.find_first_not_of(" \t\r") == std::string_view::npos) return std::string_view::npos;
            continue;
        }
        if (text[j] != '$') continue;
        const bool digit_after = j + 1 < text.size() && std::isdigit(static_cast<unsigned char>(text[j + 1]));
        if (!is_space(text[j - 1]) && !digit_after) return j;
    }
    return std::string_view::npos;
}

void protect_prose(std::string_view text, ProtectedMath& out) {
    size_t i = 0;
    while (i < text.size()) {
        const size_t after_code = skip_code_span(text, i);
        if (after_code != i) {
            out.text.append(text.substr(i, after_code - i));
            i = after_code;
            continue;
        }
        const char c = text[i];
        if (c == '\\' && i + 1 < text.size()) {
            out.text.append(text.substr(i, 2));
            i += 2;
            continue;
        }
        if (c == '`') {  // an unclosed backtick run is literal
            while (i < text.size() && text[i] == '`') out.text.push_back(text[i++]);
            continue;
        }
        if (c != '$') {
            out.text.push_back(c);
            ++i;
            continue;
        }
        const bool display = text.substr(i, 2) == "$$";
        const size_t close = display ? text.find("$$", i + 2) : inline_close(text, i);
        if (close == std::string_view::npos) {
            out.text.append(display ? "$$" : "$");
            i += display ? 2 : 1;
            continue;
        }
        const size_t end = close + (display ? 2 : 1);
        out.text += placeholder(out.formulas.size());
        out.formulas.emplace_back(text.substr(i, end - i));
        out.display.push_back(display);
        i = end;
    }
}

}  // namespace

ProtectedMath protect_math(std::string_view markdown) {
    ProtectedMath out;
    for (const MarkdownChunk& chunk : split_fenced_blocks(markdown)) {
        if (chunk.fenced) out.text += chunk.text;
        else protect_prose(chunk.text, out);
    }
    return out;
}

std::string restore_math(std::string_view html, const ProtectedMath& math) {
    std::string out;
    size_t pos = 0;
    while (true) {
        const size_t at = html.find("LKMATH", pos);
        if (at == std::string_view::npos) break;
        size_t j = at + 6;
        size_t n = 0;
        bool digits = false;
        while (j < html.size() && std::isdigit(static_cast<unsigned char>(html[j]))) {
            n = n * 10 + size_t(html[j] - '0');
            ++j;
            digits = true;
        }
        if (!digits || j >= html.size() || html[j] != 'X' || n >= math.formulas.size()) {
            out.append(html.substr(pos, at + 6 - pos));
            pos = at + 6;
            continue;
        }
        const std::string tex = html_escape(math.formulas[n]);
        const bool alone = math.display[n] && at >= 3 && html.substr(at - 3, 3) == "<p>" &&
                           html.substr(j + 1, 4) == "</p>";
        if (alone) {
            out.append(html.substr(pos, at - 3 - pos));
            out += "<div class=\"math math-display\">" + tex + "</div>";
            pos = j + 5;
        } else {
            out.append(html.substr(pos, at - pos));
            out += std::string("<span class=\"math ") + (math.display[n] ? "math-display" : "math-inline") + "\">" +
                   tex + "</span>";
            pos = j + 1;
        }
    }
    out.append(html.substr(pos));
    return out;
}

}  // namespace minfer::book
