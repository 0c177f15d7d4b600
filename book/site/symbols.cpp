#include "book/site/symbols.h"

#include <algorithm>
#include <boost/json.hpp>
#include <fmt/format.h>

#include "book/site/book_index.h"
#include "book/site/html.h"
#include "book/site/run_command.h"

namespace minfer::book {

namespace json = boost::json;

std::string SourceTarget::url() const {
    std::string u = "/source/" + url_encode_path(path);
    if (first_line > 0) u += fmt::format("#L{}-L{}", first_line, last_line);
    return u;
}

int declaration_start(std::string_view text, int line) {
    std::vector<std::string_view> lines;
    for (size_t at = 0; at <= text.size();) {
        const size_t end = text.find('\n', at);
        lines.push_back(text.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at));
        if (end == std::string_view::npos) break;
        at = end + 1;
    }
    auto trim = [](std::string_view s) {
        while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
        while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
        return s;
    };
    int first = line;
    while (first > 1 && size_t(first - 1) <= lines.size()) {
        const std::string_view above = trim(lines[size_t(first - 2)]);
        if (above.empty() || above.starts_with("//") || above.starts_with("/*") || above.starts_with("*") ||
            above.starts_with("#") || above.starts_with("}"))
            break;
        const char last = above.back();
        if (last == ';' || last == '{' || last == '}' || last == ':' || last == ',') break;
        --first;
    }
    return first;
}

std::vector<Tag> parse_ctags_json(std::string_view output) {
    std::vector<Tag> tags;
    while (!output.empty()) {
        const size_t nl = output.find('\n');
        const std::string_view line = output.substr(0, nl);
        output.remove_prefix(nl == std::string_view::npos ? output.size() : nl + 1);
        if (line.empty()) continue;
        boost::system::error_code ec;
        const json::value v = json::parse(line, ec);
        if (ec || !v.is_object()) continue;
        const json::object& o = v.as_object();
        const json::value* type = o.if_contains("_type");
        if (!type || !type->is_string() || type->as_string() != "tag") continue;
        Tag t;
        t.name = json::value_to<std::string>(o.at("name"));
        if (const json::value* k = o.if_contains("kind"); k && k->is_string()) t.kind = std::string(k->as_string());
        if (const json::value* l = o.if_contains("line"); l && l->is_int64()) t.line = int(l->as_int64());
        t.end = t.line;  // one-line definitions (a macro, a variable) carry no end
        if (const json::value* e = o.if_contains("end"); e && e->is_int64()) t.end = int(e->as_int64());
        t.qualified = t.name;
        if (const json::value* s = o.if_contains("scope"); s && s->is_string())
            t.qualified = std::string(s->as_string()) + "::" + t.name;
        tags.push_back(std::move(t));
    }
    return tags;
}

std::vector<Tag> matching_tags(const std::vector<Tag>& tags, std::string_view symbol) {
    const bool qualified = symbol.find("::") != std::string_view::npos;
    const std::string suffix = "::" + std::string(symbol);
    std::vector<Tag> definitions, declarations;
    for (const Tag& t : tags) {
        const bool match = qualified ? (t.qualified == symbol || t.qualified.ends_with(suffix)) : t.name == symbol;
        if (!match) continue;
        std::vector<Tag>& into = t.kind == "prototype" ? declarations : definitions;
        // ctags can report one definition twice (a typedef'd struct): one line, one definition.
        bool seen = false;
        for (const Tag& o : into) seen = seen || o.line == t.line;
        if (!seen) into.push_back(t);
    }
    return definitions.empty() ? declarations : definitions;
}

const std::vector<Tag>& SymbolIndex::tags_for(const std::string& path) {
    auto it = cache_.find(path);
    if (it != cache_.end()) return it->second;
    // -D: without it ctags takes `__global__ __launch_bounds__(N) void kernel(` for a
    // function named __launch_bounds__.
    const auto result = run_command({"ctags", "--output-format=json", "--fields=+neZ", "--kinds-C++=+p",
                                     "--kinds-CUDA=+p", "-D", "__launch_bounds__(...)=", "-f", "-",
                                     (tree_.root() / path).string()});
    if (!result) throw BookError("src: links need universal-ctags (the `ctags` program), which is not installed");
    if (result->exit_code != 0) throw BookError("ctags failed on " + path);
    return cache_.emplace(path, parse_ctags_json(result->out)).first->second;
}

SourceTarget SymbolIndex::resolve(std::string_view target) {
    SourceTarget t;
    const size_t hash = target.find('#');
    t.path = std::string(target.substr(0, hash));
    if (hash != std::string_view::npos) t.symbol = std::string(target.substr(hash + 1));
    if (t.path.empty() || !tree_.contains(t.path))
        throw BookError("src:" + std::string(target) + ": no file " + t.path + " in the repository");
    if (hash != std::string_view::npos && t.symbol.empty())
        throw BookError("src:" + std::string(target) + ": the symbol after # is empty");
    if (t.symbol.empty()) return t;
    std::vector<Tag> found = matching_tags(tags_for(t.path), t.symbol);
    std::sort(found.begin(), found.end(), [](const Tag& a, const Tag& b) { return a.line < b.line; });
    if (found.empty())
        throw BookError("src:" + std::string(target) + ": ctags finds no symbol " + t.symbol + " in " + t.path);
    if (found.size() > 1) {
        std::string lines;
        for (const Tag& f : found) lines += (lines.empty() ? "" : ", ") + std::to_string(f.line);
        throw BookError("src:" + std::string(target) + ": " + t.symbol + " is ambiguous, defined " +
                        std::to_string(found.size()) + " times in " + t.path + " (lines " + lines +
                        "); qualify it, e.g. Class::" + t.symbol);
    }
    t.first_line = declaration_start(tree_.read(t.path), found[0].line);
    t.last_line = std::max(found[0].end, found[0].line);
    return t;
}

}  // namespace minfer::book
