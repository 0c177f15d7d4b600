#include "book/site/heading_ids.h"

#include <set>

namespace minfer::book {

std::string add_heading_ids(std::string_view html) {
    std::string out;
    std::set<std::string> used;
    size_t pos = 0;
    while (true) {
        const size_t open = html.find("<h", pos);
        if (open == std::string_view::npos || open + 3 >= html.size()) break;
        const char level = html[open + 2];
        if (level < '1' || level > '6' || html[open + 3] != '>') {
            out.append(html.substr(pos, open + 2 - pos));
            pos = open + 2;
            continue;
        }
        const std::string close_tag = std::string("</h") + level + ">";
        const size_t close = html.find(close_tag, open);
        if (close == std::string_view::npos) break;
        std::string slug;
        bool in_tag = false;
        for (char c : html.substr(open + 4, close - open - 4)) {
            if (c == '<') in_tag = true;
            else if (c == '>') in_tag = false;
            else if (in_tag) continue;
            else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') slug.push_back(c);
            else if (c >= 'A' && c <= 'Z') slug.push_back(char(c - 'A' + 'a'));
            else if ((c == ' ' || c == '-') && !slug.empty() && slug.back() != '-') slug.push_back('-');
        }
        while (!slug.empty() && slug.back() == '-') slug.pop_back();
        if (slug.empty()) slug = "section";
        std::string id = slug;
        for (int n = 2; !used.insert(id).second; ++n) id = slug + "-" + std::to_string(n);
        out.append(html.substr(pos, open - pos));
        out += std::string("<h") + level + " id=\"" + id + "\">";
        pos = open + 4;
    }
    out.append(html.substr(pos));
    return out;
}

}  // namespace minfer::book
