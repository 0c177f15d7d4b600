#include "server/tool_call_parser.h"

#include <algorithm>
#include <random>

namespace minfer {

namespace json = boost::json;

namespace {

constexpr size_t npos = std::string_view::npos;

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

size_t skip_space(std::string_view s, size_t i) {
    while (i < s.size() && is_space(s[i])) ++i;
    return i;
}

// One past the JSON string that opens at s[i] == '"', or npos if it is unfinished.
size_t string_end(std::string_view s, size_t i) {
    for (size_t j = i + 1; j < s.size(); ++j) {
        if (s[j] == '\\') ++j;
        else if (s[j] == '"') return j + 1;
    }
    return npos;
}

// One past the JSON value that starts at s[i], or npos if it may still go on.
size_t value_end(std::string_view s, size_t i) {
    if (i >= s.size()) return npos;
    if (s[i] == '"') return string_end(s, i);
    if (s[i] == '{' || s[i] == '[') {
        int depth = 0;
        for (size_t j = i; j < s.size(); ++j) {
            if (s[j] == '"') {
                j = string_end(s, j);
                if (j == npos) return npos;
                --j;
            } else if (s[j] == '{' || s[j] == '[') {
                ++depth;
            } else if ((s[j] == '}' || s[j] == ']') && --depth == 0) {
                return j + 1;
            }
        }
        return npos;
    }
    size_t j = i;  // a number, true, false or null: it ends where a delimiter comes
    while (j < s.size() && !is_space(s[j]) && s[j] != ',' && s[j] != '}' && s[j] != ']') ++j;
    return j < s.size() ? j : npos;
}

std::string decode_string(std::string_view literal) {
    boost::system::error_code ec;
    const json::value v = json::parse(literal, ec);
    return !ec && v.is_string() ? std::string(v.get_string()) : std::string();
}

struct CallScan {
    ToolCallText call;
    size_t end = npos;  // one past the closing brace, once it came
    bool is_call = true;  // false: this object is not a call
};

// The call object {"name": ..., "arguments" | "parameters": ...} that opens at s[i] == '{'.
CallScan scan_call(std::string_view s, size_t i) {
    CallScan r;
    auto not_a_call = [&] {
        r.is_call = false;
        return r;
    };
    bool has_arguments = false;
    for (size_t j = i + 1;;) {
        j = skip_space(s, j);
        if (j >= s.size()) return r;
        if (s[j] == '}') {
            r.end = j + 1;
            break;
        }
        if (s[j] != '"') return not_a_call();
        const size_t key_end = string_end(s, j);
        if (key_end == npos) return r;
        const std::string key = decode_string(s.substr(j, key_end - j));
        j = skip_space(s, key_end);
        if (j >= s.size()) return r;
        if (s[j] != ':') return not_a_call();
        j = skip_space(s, j + 1);
        if (j >= s.size()) return r;
        const size_t end = value_end(s, j);
        if (key == "name") {
            if (s[j] != '"') return not_a_call();
            if (end == npos) return r;
            r.call.name = decode_string(s.substr(j, end - j));
        } else if (key == "arguments" || key == "parameters") {
            has_arguments = true;
            r.call.arguments = std::string(s.substr(j, end == npos ? npos : end - j));
        }
        if (end == npos) return r;
        j = skip_space(s, end);
        if (j >= s.size()) return r;
        if (s[j] == ',') {
            ++j;
        } else if (s[j] == '}') {
            r.end = j + 1;
            break;
        } else {
            return not_a_call();
        }
    }
    if (r.call.name.empty()) return not_a_call();
    if (!has_arguments) r.call.arguments = "{}";
    boost::system::error_code ec;
    json::parse(r.call.arguments, ec);
    if (ec) return not_a_call();
    r.call.complete = true;
    return r;
}

// How many bytes at the end of `text` could begin `marker` (held back from a stream).
size_t partial_marker(std::string_view text, std::string_view marker) {
    for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n)
        if (text.ends_with(marker.substr(0, n))) return n;
    return 0;
}

void parse_tagged(std::string_view text, bool final, ToolCallParse& p) {
    static constexpr std::string_view kOpen = "<tool_call>";
    size_t at = text.find(kOpen);
    if (at == npos) {
        p.content = text.substr(0, text.size() - (final ? 0 : partial_marker(text, kOpen)));
        return;
    }
    p.content = text.substr(0, at);
    while (at != npos) {
        const size_t j = skip_space(text, at + kOpen.size());
        if (j >= text.size() || text[j] != '{') break;
        const CallScan c = scan_call(text, j);
        if (!c.is_call) break;
        p.calls.push_back(c.call);
        if (c.end == npos) break;
        at = text.find(kOpen, c.end);
    }
}

// A call, a list of calls, or calls joined by ';', after the format's marker.
void parse_json_calls(std::string_view text, std::string_view marker, bool final, ToolCallParse& p) {
    size_t j = skip_space(text, 0);
    if (!marker.empty() && text.substr(j).starts_with(marker)) j = skip_space(text, j + marker.size());
    if (j >= text.size() || (!marker.empty() && marker.starts_with(text.substr(j)))) {
        if (final) p.content = text;  // nothing yet but space or the marker's start: wait
        return;
    }
    const bool list = text[j] == '[';
    if (text[j] != '{' && !list) {
        p.content = text;
        return;
    }
    if (list) j = skip_space(text, j + 1);
    while (j < text.size() && text[j] == '{') {
        const CallScan c = scan_call(text, j);
        if (!c.is_call) {
            p.calls.clear();
            p.content = text;
            return;
        }
        p.calls.push_back(c.call);
        if (c.end == npos) return;
        j = skip_space(text, c.end);
        if (j < text.size() && (text[j] == ',' || (!list && text[j] == ';'))) j = skip_space(text, j + 1);
    }
}

}  // namespace

std::optional<ToolCallFormat> tool_call_format_named(std::string_view name) {
    if (name == "hermes") return ToolCallFormat::Hermes;
    if (name == "llama3_json") return ToolCallFormat::Llama3Json;
    if (name == "mistral") return ToolCallFormat::Mistral;
    if (name == "json") return ToolCallFormat::Json;
    return std::nullopt;
}

std::string_view tool_call_format_name(ToolCallFormat f) {
    switch (f) {
        case ToolCallFormat::Hermes: return "hermes";
        case ToolCallFormat::Llama3Json: return "llama3_json";
        case ToolCallFormat::Mistral: return "mistral";
        case ToolCallFormat::Json: return "json";
    }
    return "json";
}

ToolCallFormat tool_call_format_of_template(std::string_view source) {
    if (source.find("<tool_call>") != npos) return ToolCallFormat::Hermes;
    if (source.find("[TOOL_CALLS]") != npos) return ToolCallFormat::Mistral;
    if (source.find("<|python_tag|>") != npos || source.find("ipython") != npos) return ToolCallFormat::Llama3Json;
    return ToolCallFormat::Json;
}

ToolCallParse parse_tool_calls(ToolCallFormat format, std::string_view text, bool final) {
    ToolCallParse p;
    switch (format) {
        case ToolCallFormat::Hermes: parse_tagged(text, final, p); break;
        case ToolCallFormat::Llama3Json: parse_json_calls(text, "<|python_tag|>", final, p); break;
        case ToolCallFormat::Mistral: parse_json_calls(text, "[TOOL_CALLS]", final, p); break;
        case ToolCallFormat::Json: parse_json_calls(text, "", final, p); break;
    }
    if (final) {
        std::erase_if(p.calls, [](const ToolCallText& c) { return !c.complete; });
        if (p.calls.empty()) p.content = text;
    }
    return p;
}

ToolCallStream::Delta ToolCallStream::update(std::string_view text, bool final) {
    const ToolCallParse p = parse_tool_calls(format_, text, final);
    Delta d;
    if (p.content.size() > content_bytes_) {
        d.content = p.content.substr(content_bytes_);
        content_bytes_ = p.content.size();
    }
    for (size_t i = 0; i < p.calls.size() && !p.calls[i].name.empty(); ++i) {
        const ToolCallText& c = p.calls[i];
        if (i == sent_.size()) {
            sent_.push_back({new_tool_call_id()});
            d.tool_calls.push_back(json::object{{"index", i},
                                                {"id", sent_[i].id},
                                                {"type", "function"},
                                                {"function", {{"name", c.name}, {"arguments", ""}}}});
        }
        if (c.arguments.size() > sent_[i].argument_bytes) {
            d.tool_calls.push_back(json::object{
                {"index", i}, {"function", {{"arguments", c.arguments.substr(sent_[i].argument_bytes)}}}});
            sent_[i].argument_bytes = c.arguments.size();
        }
    }
    return d;
}

std::string new_tool_call_id() {
    static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    thread_local std::mt19937_64 rng{std::random_device{}()};
    std::string id = "call_";
    for (int i = 0; i < 24; ++i) id += kChars[rng() % (sizeof(kChars) - 1)];
    return id;
}

json::array tool_calls_json(const std::vector<ToolCallText>& calls) {
    json::array out;
    for (const ToolCallText& c : calls)
        out.push_back(json::object{{"id", new_tool_call_id()},
                                   {"type", "function"},
                                   {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    return out;
}

}  // namespace minfer
