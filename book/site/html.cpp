#include "book/site/html.h"

#include <fmt/format.h>

#include "book/site/book_index.h"

namespace minfer::book {

std::string html_escape(std::string_view text) {
    std::string out;
    out.reserve(text.size() + text.size() / 8);
    for (char c : text) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            case '\'': out += "&#39;"; break;
            default: out.push_back(c);
        }
    }
    return out;
}

std::string fill_template(std::string_view tmpl, const std::map<std::string, std::string>& vars) {
    std::string out;
    size_t pos = 0;
    while (true) {
        const size_t open = tmpl.find("{{", pos);
        if (open == std::string_view::npos) break;
        const size_t close = tmpl.find("}}", open);
        if (close == std::string_view::npos) break;
        out.append(tmpl.substr(pos, open - pos));
        const std::string name(tmpl.substr(open + 2, close - open - 2));
        const auto it = vars.find(name);
        if (it == vars.end()) throw BookError("theme: the layout uses {{" + name + "}}, which the site does not fill");
        out += it->second;
        pos = close + 2;
    }
    out.append(tmpl.substr(pos));
    return out;
}

std::string url_encode_path(std::string_view path) {
    std::string out;
    for (unsigned char c : path) {
        const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                          c == '_' || c == '.' || c == '~' || c == '/';
        if (keep) out.push_back(char(c));
        else out += fmt::format("%{:02X}", c);
    }
    return out;
}

}  // namespace minfer::book
