#include "book/site/trim.h"
#include "book/site/figure_block.h"

#include <boost/json.hpp>
#include <charconv>

#include "book/site/book_index.h"
#include "book/site/html.h"

namespace minfer::book {

namespace json = boost::json;

namespace {


bool is_slug(std::string_view s) {
    if (s.empty()) return false;
    for (char c : s)
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
    return true;
}

}  // namespace

std::string FigureSpec::options_json() const {
    json::object o;
    for (const auto& [key, value] : options) {
        const char* begin = value.data();
        const char* end = begin + value.size();
        int64_t integer = 0;
        double number = 0;
        if (value == "true" || value == "false") o[key] = value == "true";
        else if (auto [p, ec] = std::from_chars(begin, end, integer); ec == std::errc() && p == end) o[key] = integer;
        else if (auto [q, ec2] = std::from_chars(begin, end, number); ec2 == std::errc() && q == end) o[key] = number;
        else o[key] = value;
    }
    return json::serialize(o);
}

FigureSpec parse_figure_block(std::string_view body) {
    FigureSpec f;
    std::map<std::string, std::string> fields;
    while (!body.empty()) {
        const size_t nl = body.find('\n');
        const std::string_view line = trim(body.substr(0, nl));
        body.remove_prefix(nl == std::string_view::npos ? body.size() : nl + 1);
        if (line.empty()) continue;
        const size_t colon = line.find(':');
        if (colon == std::string_view::npos || trim(line.substr(0, colon)).empty())
            throw BookError("figure block: \"" + std::string(line) + "\" is not a \"key: value\" line");
        const std::string key(trim(line.substr(0, colon)));
        if (!fields.emplace(key, std::string(trim(line.substr(colon + 1)))).second)
            throw BookError("figure block: the key \"" + key + "\" appears twice");
    }
    const auto take = [&](const char* key) {
        auto it = fields.find(key);
        if (it == fields.end()) return std::string();
        std::string v = std::move(it->second);
        fields.erase(it);
        return v;
    };
    f.id = take("id");
    f.title = take("title");
    f.caption = take("caption");
    if (f.id.empty()) throw BookError("figure block: it has no id");
    if (!is_slug(f.id)) throw BookError("figure block: the id \"" + f.id + "\" is not a slug (a-z, 0-9, -)");
    if (f.title.empty()) throw BookError("figure block " + f.id + ": it has no title");
    f.options = std::move(fields);
    return f;
}

std::string figure_html(const FigureSpec& f) {
    std::string h = "<figure class=\"lk-figure\" id=\"figure-" + f.id + "\" data-figure=\"" + f.id +
                    "\" data-options='" + html_escape(f.options_json()) + "'>\n";
    h += "<noscript><p class=\"lk-noscript\">This interactive figure needs JavaScript. <a href=\"/figures/" + f.id +
         "\">Its own page</a> describes it.</p></noscript>\n";
    h += "<figcaption><strong>" + html_escape(f.title) + "</strong>";
    if (!f.caption.empty()) h += " " + html_escape(f.caption);
    h += "</figcaption>\n</figure>\n";
    return h;
}

std::string figure_markdown(const FigureSpec& f) {
    std::string m = "> **Figure: " + f.title + "**";
    if (!f.caption.empty()) m += "  \n> " + f.caption;
    m += "  \n> [Interactive figure: /figures/" + f.id + "](/figures/" + f.id + ")\n";
    return m;
}

}  // namespace minfer::book
