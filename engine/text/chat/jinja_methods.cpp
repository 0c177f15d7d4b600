// The Python methods of str, dict and list that templates call
// (`s.startswith(x)`, `d.items()`, ...), and attribute lookup (get_attribute),
// which finds them before a dict's items.
#include "engine/text/chat/jinja_builtins.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <initializer_list>
#include <limits>
#include <map>
#include <unordered_set>

#include "engine/text/chat/jinja_text.h"
#include "engine/text/chat/jinja_builtin_args.h"

namespace minfer::jinja {

namespace {

// ---- methods of str, dict and list ----------------------------------------------------

// Python's str.split / str.rsplit.
std::vector<Value> split_string(const std::string& s, const Value& sep_value, int64_t maxsplit, bool from_right) {
    std::vector<std::string> parts;
    if (sep_value.is_none() || sep_value.is_undefined()) {
        const std::u32string cps = text::decode(s);
        // Whitespace runs separate; leading and trailing whitespace is ignored.
        std::vector<std::pair<size_t, size_t>> words;
        for (size_t i = 0; i < cps.size();) {
            while (i < cps.size() && text::is_space(cps[i])) ++i;
            const size_t start = i;
            while (i < cps.size() && !text::is_space(cps[i])) ++i;
            if (i > start) words.emplace_back(start, i);
        }
        if (maxsplit >= 0 && static_cast<int64_t>(words.size()) > maxsplit + 1) {
            // The unsplit remainder keeps its whitespace on the far side, as in Python.
            if (!from_right) {
                const size_t rest_start = words[static_cast<size_t>(maxsplit)].first;
                for (int64_t i = 0; i < maxsplit; ++i)
                    parts.push_back(text::encode(std::u32string_view(cps).substr(words[i].first, words[i].second - words[i].first)));
                parts.push_back(text::encode(std::u32string_view(cps).substr(rest_start)));
            } else {
                const size_t keep = words.size() - static_cast<size_t>(maxsplit);
                parts.push_back(text::encode(std::u32string_view(cps).substr(0, words[keep - 1].second)));
                for (size_t i = keep; i < words.size(); ++i)
                    parts.push_back(text::encode(std::u32string_view(cps).substr(words[i].first, words[i].second - words[i].first)));
            }
        } else {
            for (const auto& [b, e] : words) parts.push_back(text::encode(std::u32string_view(cps).substr(b, e - b)));
        }
    } else {
        const std::string sep = require_string(sep_value, "split separator");
        if (sep.empty()) throw TemplateError("empty separator");
        if (!from_right) {
            size_t pos = 0;
            while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
                const size_t hit = s.find(sep, pos);
                if (hit == std::string::npos) break;
                parts.push_back(s.substr(pos, hit - pos));
                pos = hit + sep.size();
            }
            parts.push_back(s.substr(pos));
        } else {
            size_t end = s.size();
            std::vector<std::string> reversed;
            while (maxsplit < 0 || static_cast<int64_t>(reversed.size()) < maxsplit) {
                if (end < sep.size()) break;
                const size_t hit = s.rfind(sep, end - sep.size());
                if (hit == std::string::npos) break;
                reversed.push_back(s.substr(hit + sep.size(), end - hit - sep.size()));
                end = hit;
            }
            reversed.push_back(s.substr(0, end));
            parts.assign(reversed.rbegin(), reversed.rend());
        }
    }
    charge(parts.size());
    std::vector<Value> out;
    for (auto& p : parts) out.push_back(Value::string(std::move(p)));
    return out;
}

// str.format with positional and named fields ({} {0} {name}) and !s / !r.
std::string python_format(const std::string& f, const CallArgs& a) {
    std::string out;
    size_t auto_index = 0;
    for (size_t i = 0; i < f.size(); ++i) {
        const char c = f[i];
        if (c == '}') {
            if (i + 1 < f.size() && f[i + 1] == '}') ++i;
            else throw TemplateError("single '}' encountered in format string");
            out.push_back('}');
            continue;
        }
        if (c != '{') {
            out.push_back(c);
            continue;
        }
        if (i + 1 < f.size() && f[i + 1] == '{') {
            out.push_back('{');
            ++i;
            continue;
        }
        const size_t close = f.find('}', i);
        if (close == std::string::npos) throw TemplateError("single '{' encountered in format string");
        std::string field = f.substr(i + 1, close - i - 1);
        i = close;
        char conversion = 's';
        if (const size_t bang = field.find('!'); bang != std::string::npos) {
            if (bang + 2 != field.size() || (field[bang + 1] != 's' && field[bang + 1] != 'r'))
                throw TemplateError("unsupported conversion in format string");
            conversion = field[bang + 1];
            field.resize(bang);
        }
        if (field.find(':') != std::string::npos || field.find('.') != std::string::npos || field.find('[') != std::string::npos)
            throw TemplateError("format specs and attribute lookups in str.format are not supported");
        const Value* arg = nullptr;
        if (field.empty() || std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
            const size_t index = field.empty() ? auto_index++ : std::strtoul(field.c_str(), nullptr, 10);
            if (index >= a.positional.size()) throw TemplateError("Replacement index " + std::to_string(index) + " out of range");
            arg = &a.positional[index];
        } else {
            arg = a.find_named(field);
            if (!arg) throw TemplateError("format: no argument named '" + field + "'");
        }
        out += conversion == 'r' ? repr(*arg) : to_str(*arg);
        check_size(out.size());
    }
    return out;
}

int64_t code_point_index(const std::string& s, size_t byte_pos) {
    return static_cast<int64_t>(text::code_point_count(std::string_view(s).substr(0, byte_pos)));
}

bool affix_matches(const std::string& s, const Value& affix, bool at_start) {
    auto one = [&](const Value& x) {
        const std::string t = require_string(x, at_start ? "startswith() argument" : "endswith() argument");
        if (t.size() > s.size()) return false;
        return at_start ? s.compare(0, t.size(), t) == 0 : s.compare(s.size() - t.size(), t.size(), t) == 0;
    };
    if (affix.kind() == Kind::Tuple) return std::any_of(affix.items().begin(), affix.items().end(), one);
    return one(affix);
}

template <typename Pred>
Value all_chars(const std::string& s, Pred pred) {
    if (s.empty()) return Value::boolean(false);
    for (size_t pos = 0; pos < s.size();)
        if (!pred(text::next_code_point(s, pos))) return Value::boolean(false);
    return Value::boolean(true);
}

Value call_string_method(const Value& self, const std::string& name, CallArgs& a) {
    const std::string& s = self.str();
    if (name == "startswith" || name == "endswith") {
        Params p(name, a, {"prefix"});
        return Value::boolean(affix_matches(s, p.required(0), name == "startswith"));
    }
    if (name == "split" || name == "rsplit") {
        Params p(name, a, {"sep", "maxsplit"});
        return Value::list(split_string(s, p.get_or(0, Value::none()), p.int_or(1, -1), name == "rsplit"));
    }
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
        Params p(name, a, {"chars"});
        const bool left = name != "rstrip", right = name != "lstrip";
        if (p.has(0)) {
            const std::u32string chars = text::decode(require_string(p.get_or(0, Value()), name + "() argument"));
            return same_flavor_string(self, text::strip(s, left, right, &chars));
        }
        return same_flavor_string(self, text::strip(s, left, right));
    }
    if (name == "replace") {
        Params p(name, a, {"old", "new", "count"});
        CallArgs args;
        args.positional = {Value::string(require_string(p.required(0), "replace() argument")),
                           Value::string(require_string(p.required(1), "replace() argument")),
                           Value::integer(p.int_or(2, -1))};
        return apply_filter("replace", self, args);  // the replace filter
    }
    if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
        no_args(name, a);
        if (name == "upper") return same_flavor_string(self, text::upper(s));
        if (name == "lower") return same_flavor_string(self, text::lower(s));
        if (name == "title") return same_flavor_string(self, text::title(s));
        return same_flavor_string(self, text::capitalize(s));
    }
    if (name == "find" || name == "rfind" || name == "index") {
        Params p(name, a, {"sub"});
        const std::string sub = require_string(p.required(0), name + "() argument");
        const size_t hit = name == "rfind" ? s.rfind(sub) : s.find(sub);
        if (hit == std::string::npos) {
            if (name == "index") throw TemplateError("substring not found");
            return Value::integer(-1);
        }
        return Value::integer(code_point_index(s, hit));
    }
    if (name == "count") {
        Params p(name, a, {"sub"});
        const std::string sub = require_string(p.required(0), "count() argument");
        if (sub.empty()) return Value::integer(static_cast<int64_t>(text::code_point_count(s)) + 1);
        int64_t n = 0;
        for (size_t pos = s.find(sub); pos != std::string::npos; pos = s.find(sub, pos + sub.size())) ++n;
        return Value::integer(n);
    }
    if (name == "format") return same_flavor_string(self, python_format(s, a));
    if (name == "join") {
        Params p(name, a, {"iterable"});
        std::string out;
        size_t i = 0;
        for (const Value& item : iterate(p.required(0))) {
            if (!item.is_string())
                throw TemplateError("sequence item " + std::to_string(i) + ": expected str instance, " + type_name(item) + " found");
            if (i++) out += s;
            out += item.str();
            check_size(out.size());
        }
        return Value::string(std::move(out));
    }
    if (name == "splitlines") {
        no_args(name, a);
        std::vector<Value> lines;
        for (auto& l : text::splitlines(s)) lines.push_back(Value::string(std::move(l)));
        return Value::list(std::move(lines));
    }
    if (name == "removeprefix" || name == "removesuffix") {
        Params p(name, a, {"affix"});
        const std::string affix = require_string(p.required(0), name + "() argument");
        if (affix_matches(s, Value::string(affix), name == "removeprefix"))
            return same_flavor_string(self, name == "removeprefix" ? s.substr(affix.size()) : s.substr(0, s.size() - affix.size()));
        return self;
    }
    no_args(name, a);
    if (name == "isdigit") return all_chars(s, [](char32_t c) { return c >= '0' && c <= '9'; });
    if (name == "isalpha") return all_chars(s, [](char32_t c) { return text::is_alnum(c) && !(c >= '0' && c <= '9'); });
    if (name == "isalnum") return all_chars(s, [](char32_t c) { return text::is_alnum(c); });
    if (name == "isspace") return all_chars(s, [](char32_t c) { return text::is_space(c); });
    if (name == "islower" || name == "isupper") {
        bool cased = false;
        for (size_t pos = 0; pos < s.size();) {
            const char32_t c = text::next_code_point(s, pos);
            if (!text::is_cased(c)) continue;
            cased = true;
            if (name == "islower" ? text::to_lower(c) != c : text::to_upper(c) != c) return Value::boolean(false);
        }
        return Value::boolean(cased);
    }
    throw TemplateError("'str' object has no attribute '" + name + "'");
}

Value call_method(const Value& self, const std::string& name, CallArgs& a) {
    if (self.is_string()) return call_string_method(self, name, a);
    if (self.kind() == Kind::Dict) {
        if (name == "get") {
            Params p(name, a, {"key", "default"});
            const Value& key = p.required(0);
            const Value* v = self.dict().find(key);
            return v ? *v : (a.positional.size() > 1 ? a.positional[1] : Value::none());
        }
        no_args(name, a);
        std::vector<Value> out;
        for (const auto& [k, v] : self.dict().entries()) {
            if (name == "items") out.push_back(Value::tuple({k, v}));
            else out.push_back(name == "keys" ? k : v);
        }
        return Value::list(std::move(out));
    }
    if (self.is_sequence()) {
        Params p(name, a, {"value"});
        const Value& x = p.required(0);
        int64_t count = 0;
        for (size_t i = 0; i < self.items().size(); ++i) {
            if (!equal(self.items()[i], x)) continue;
            if (name == "index") return Value::integer(static_cast<int64_t>(i));
            ++count;
        }
        if (name == "index") throw TemplateError(repr(x) + " is not in list");
        return Value::integer(count);
    }
    throw TemplateError(std::string("'") + type_name(self) + "' object has no attribute '" + name + "'");
}

Value bound_method(const Value& self, std::string_view name) {
    std::string n(name);
    return Value::function(n, [self, n](CallArgs& args) { return call_method(self, n, args); });
}

}  // namespace

// ---- public ------------------------------------------------------------------------------

Value get_attribute(const Value& object, std::string_view name) {
    const std::string n(name);
    switch (object.kind()) {
        case Kind::Undefined: throw_undefined(object);
        case Kind::Dict:
            if (in_table(kDictMethods, name)) return bound_method(object, name);
            if (const Value* v = object.dict().find(name)) return *v;
            return Value::undefined("'dict object' has no attribute '" + n + "'");
        case Kind::Namespace:
            if (const Value* v = object.dict().find(name)) return *v;
            break;
        case Kind::String:
            if (in_table(kStringMethods, name)) return bound_method(object, name);
            break;
        case Kind::List:
        case Kind::Tuple:
            if (in_table(kListMethods, name)) return bound_method(object, name);
            break;
        default: break;
    }
    return Value::undefined("'" + std::string(type_name(object)) + " object' has no attribute '" + n + "'");
}

}  // namespace minfer::jinja
