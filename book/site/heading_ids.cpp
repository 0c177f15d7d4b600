#include "book/site/heading_ids.h"

#include <set>
#include <vector>

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
        bool in_tag = false, in_entity = false;  // "&amp;" is one character of the text, not a word
        for (char c : html.substr(open + 4, close - open - 4)) {
            if (c == '<') in_tag = true;
            else if (c == '>') in_tag = false;
            else if (in_tag) continue;
            else if (c == '&') in_entity = true;
            else if (in_entity) in_entity = c != ';';
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
        out.append(html.substr(open + 4, close - open - 4));
        // A permalink after the heading's text (h2 to h4: the page's own title needs none).
        if (level >= '2' && level <= '4')
            out += "<a class=\"permalink\" href=\"#" + id + "\" aria-label=\"Link to this heading\">#</a>";
        out += close_tag;
        pos = close + close_tag.size();
    }
    out.append(html.substr(pos));
    return out;
}

std::vector<Heading> page_outline(std::string_view html) {
    std::vector<Heading> out;
    size_t pos = 0;
    while (true) {
        const size_t open = html.find("<h", pos);
        if (open == std::string_view::npos || open + 8 >= html.size()) break;
        pos = open + 2;
        const char level = html[open + 2];
        if ((level != '2' && level != '3') || html.substr(open + 3, 5) != " id=\"") continue;
        const size_t id_end = html.find('"', open + 8);
        const std::string close_tag = std::string("</h") + level + ">";
        const size_t body = html.find('>', open);
        const size_t close = html.find(close_tag, open);
        if (id_end == std::string_view::npos || body == std::string_view::npos || close == std::string_view::npos) break;
        Heading h{level - '0', std::string(html.substr(open + 8, id_end - open - 8)), ""};
        std::string_view inner = html.substr(body + 1, close - body - 1);
        if (const size_t link = inner.find("<a class=\"permalink\""); link != std::string_view::npos) inner = inner.substr(0, link);
        bool in_tag = false;
        for (char c : inner) {  // the text, tags dropped (entities stay escaped: it goes back into HTML)
            if (c == '<') in_tag = true;
            else if (c == '>') in_tag = false;
            else if (!in_tag) h.text.push_back(c);
        }
        out.push_back(std::move(h));
        pos = close + close_tag.size();
    }
    return out;
}

}  // namespace minfer::book
