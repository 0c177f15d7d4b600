// jinja2's filters (abs ... wordcount) and their helpers: the table that
// is_filter and apply_filter look names up in (a catalogue: 620 lines).
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

// The value at a dotted path ("function.name", "0"), by jinja2's getitem.
Value get_path(const Value& item, const std::string& path) {
    Value v = item;
    size_t start = 0;
    while (true) {
        const size_t dot = path.find('.', start);
        const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
        v = digits ? get_item(v, Value::integer(std::strtoll(part.c_str(), nullptr, 10))) : get_item(v, Value::string(part));
        if (dot == std::string::npos) return v;
        start = dot + 1;
    }
}

Value lower_if_string(const Value& v) { return v.is_string() ? Value::string(text::lower(v.str())) : v; }

// A hashable key with Python's equality (1 == 1.0 == True), for unique().
std::string hash_key(const Value& v) {
    switch (v.kind()) {
        case Kind::None: return "N";
        case Kind::Undefined: return "U";
        case Kind::String: return "s" + v.str();
        case Kind::Bool:
        case Kind::Int: return "n" + std::to_string(v.int_value());
        case Kind::Float: {
            const double d = v.float_value();
            if (std::floor(d) == d && std::fabs(d) < 9.2e18) return "n" + std::to_string(static_cast<int64_t>(d));
            return "f" + text::float_repr(d);
        }
        case Kind::Tuple: {
            std::string k = "t(";
            for (const Value& x : v.items()) k += hash_key(x) + ",";
            return k + ")";
        }
        default: throw TemplateError(std::string("unhashable type: '") + type_name(v) + "'");
    }
}

// ---- filters ---------------------------------------------------------------------

Value f_abs(const Value& v, CallArgs& a) {
    no_args("abs", a);
    if (v.kind() == Kind::Float) return Value::number(std::fabs(v.float_value()));
    if (v.is_integral()) return v.int_value() < 0 ? negate(v) : Value::integer(v.int_value());
    throw TemplateError(std::string("bad operand type for abs(): '") + type_name(v) + "'");
}

// Python's getattr only: unlike `.name`, no fallback to the dict's items.
Value f_attr(const Value& v, CallArgs& a) {
    Params p("attr", a, {"name"});
    const std::string name = to_str(p.required(0));
    if (v.kind() == Kind::Dict && !in_table(kDictMethods, name)) return Value::undefined("'dict object' has no attribute '" + name + "'");
    return get_attribute(v, name);
}

Value f_batch(const Value& v, CallArgs& a) {
    Params p("batch", a, {"linecount", "fill_with"});
    const int64_t n = p.int_or(0, 0);
    if (n < 1) throw TemplateError("batch(): linecount must be at least 1");
    std::vector<Value> batches, current;
    for (Value& item : iterate(v)) {
        if (static_cast<int64_t>(current.size()) == n) batches.push_back(Value::list(std::exchange(current, {})));
        current.push_back(std::move(item));
    }
    if (!current.empty()) {
        if (p.has(1))
            while (static_cast<int64_t>(current.size()) < n) current.push_back(p.get_or(1, Value::none()));
        batches.push_back(Value::list(std::move(current)));
    }
    return Value::generator(std::move(batches));
}

Value f_capitalize(const Value& v, CallArgs& a) {
    no_args("capitalize", a);
    return same_flavor_string(v, text::capitalize(to_str(v)));
}

std::string center(const std::string& s, int64_t width) {
    const int64_t len = static_cast<int64_t>(text::code_point_count(s));
    if (width <= len) return s;
    check_size(static_cast<size_t>(width));
    const int64_t margin = width - len;
    const int64_t left = margin / 2 + (margin & width & 1);
    return std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(margin - left), ' ');
}

Value f_center(const Value& v, CallArgs& a) {
    Params p("center", a, {"width"});
    return same_flavor_string(v, center(to_str(v), p.int_or(0, 80)));
}

Value f_length(const Value& v, CallArgs& a) {
    no_args("length", a);
    return Value::integer(length(v));
}

Value f_default(const Value& v, CallArgs& a) {
    Params p("default", a, {"default_value", "boolean"});
    const bool use_default = v.is_undefined() || (p.bool_or(1, false) && !truthy(v));
    if (!use_default) return v;
    return p.given(0) ? *p.given(0) : Value::string("");
}

Value f_dictsort(const Value& v, CallArgs& a) {
    Params p("dictsort", a, {"case_sensitive", "by", "reverse"});
    if (v.kind() != Kind::Dict) throw TemplateError("dictsort(): a dict is required");
    const bool case_sensitive = p.bool_or(0, false);
    const std::string by = p.string_or(1, "key");
    if (by != "key" && by != "value") throw TemplateError("dictsort(): you can only sort by either \"key\" or \"value\"");
    const size_t pos = by == "key" ? 0 : 1;
    std::vector<Value> pairs;
    for (const auto& [k, item] : v.dict().entries()) pairs.push_back(Value::tuple({k, item}));
    auto key = [&](const Value& pair) { return case_sensitive ? pair.items()[pos] : lower_if_string(pair.items()[pos]); };
    const bool reverse = p.bool_or(2, false);
    std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) {
        return reverse ? compare(key(y), key(x)) < 0 : compare(key(x), key(y)) < 0;
    });
    return Value::list(std::move(pairs));
}

Value f_escape(const Value& v, CallArgs& a) {
    no_args("escape", a);
    if (v.is_markup()) return v;
    return Value::string(text::html_escape(to_str(v)), true);
}

Value f_first(const Value& v, CallArgs& a) {
    no_args("first", a);
    std::vector<Value> items = iterate(v);
    if (items.empty()) return Value::undefined("No first item, sequence was empty.");
    return items.front();
}

Value f_last(const Value& v, CallArgs& a) {
    no_args("last", a);
    if (v.kind() == Kind::Generator) throw TemplateError("'generator' object is not reversible");
    std::vector<Value> items = iterate(v);
    if (items.empty()) return Value::undefined("No last item, sequence was empty.");
    return items.back();
}

std::optional<double> parse_python_float(const std::string& s) {
    std::string t = text::strip(s, true, true);
    t.erase(std::remove(t.begin(), t.end(), '_'), t.end());
    if (t.empty()) return std::nullopt;
    const std::string l = text::lower(t);
    if (l.find('x') != std::string::npos) return std::nullopt;  // strtod reads hex floats, Python does not
    char* end = nullptr;
    const double d = std::strtod(t.c_str(), &end);
    if (end != t.c_str() + t.size()) return std::nullopt;
    return d;
}

std::optional<int64_t> parse_python_int(const std::string& s, int64_t base) {
    std::string t = text::strip(s, true, true);
    bool negative = false;
    size_t i = 0;
    if (i < t.size() && (t[i] == '+' || t[i] == '-')) negative = t[i++] == '-';
    if (base == 16 && t.compare(i, 2, "0x") == 0) i += 2;
    if (i >= t.size() || base < 2 || base > 36) return std::nullopt;
    int64_t value = 0;
    for (; i < t.size(); ++i) {
        if (t[i] == '_' && i + 1 < t.size() && t[i + 1] != '_') continue;
        const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(t[i])));
        const int digit = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'z') ? c - 'a' + 10 : 99;
        if (digit >= base) return std::nullopt;
        if (__builtin_mul_overflow(value, base, &value) || __builtin_add_overflow(value, digit, &value)) return std::nullopt;
    }
    return negative ? -value : value;
}

Value f_float(const Value& v, CallArgs& a) {
    Params p("float", a, {"default"});
    if (v.is_number()) return Value::number(v.float_value());
    if (v.is_string())
        if (auto d = parse_python_float(v.str())) return Value::number(*d);
    return p.get_or(0, Value::number(0.0));
}

Value f_int(const Value& v, CallArgs& a) {
    Params p("int", a, {"default", "base"});
    const Value def = p.get_or(0, Value::integer(0));
    if (v.is_integral()) return Value::integer(v.int_value());
    auto from_double = [&](double d) {
        if (std::isnan(d) || std::fabs(d) >= 9.2e18) return def;
        return Value::integer(static_cast<int64_t>(d));
    };
    if (v.kind() == Kind::Float) return from_double(v.float_value());
    if (v.is_string()) {
        if (auto i = parse_python_int(v.str(), p.int_or(1, 10))) return Value::integer(*i);
        if (auto d = parse_python_float(v.str())) return from_double(*d);
    }
    return def;
}

Value f_format(const Value& v, CallArgs& a) {
    if (!a.named.empty()) {
        Dict d;
        for (const auto& [k, x] : a.named) d.set(Value::string(k), x);
        return percent_format(Value::string(to_str(v), v.is_markup()), Value::dict(std::move(d)));
    }
    return percent_format(Value::string(to_str(v), v.is_markup()), Value::tuple(a.positional));
}

Value f_indent(const Value& v, CallArgs& a) {
    Params p("indent", a, {"width", "first", "blank"});
    std::string indentation = "    ";
    if (p.has(0)) {
        const Value w = p.get_or(0, Value());
        if (w.is_string()) indentation = w.str();
        else if (w.is_integral()) {
            check_size(static_cast<size_t>(std::max<int64_t>(0, w.int_value())));
            indentation = std::string(static_cast<size_t>(std::max<int64_t>(0, w.int_value())), ' ');
        } else throw TemplateError("indent(): width must be an integer or a string");
    }
    const std::string s = to_str(v) + "\n";  // jinja2 adds a newline so that splitlines keeps a trailing empty line
    const std::vector<std::string> lines = text::splitlines(s);
    std::string out;
    if (p.bool_or(2, false)) {
        for (size_t i = 0; i < lines.size(); ++i) {
            if (i) out += "\n" + indentation;
            out += lines[i];
        }
    } else {
        for (size_t i = 0; i < lines.size(); ++i) {
            if (i) {
                out += "\n";
                if (!lines[i].empty()) out += indentation;
            }
            out += lines[i];
            check_size(out.size());
        }
    }
    if (p.bool_or(1, false)) out = indentation + out;
    check_size(out.size());
    return same_flavor_string(v, std::move(out));
}

Value f_items(const Value& v, CallArgs& a) {
    no_args("items", a);
    if (v.is_undefined()) return Value::generator({});
    if (v.kind() != Kind::Dict) throw TemplateError("Can only get item pairs from a mapping.");
    std::vector<Value> pairs;
    for (const auto& [k, item] : v.dict().entries()) pairs.push_back(Value::tuple({k, item}));
    return Value::generator(std::move(pairs));
}

Value f_join(const Value& v, CallArgs& a) {
    Params p("join", a, {"d", "attribute"});
    const std::string sep = p.string_or(0, "");
    std::string out;
    bool first = true;
    for (const Value& item : iterate(v)) {
        if (!first) out += sep;
        first = false;
        out += to_str(p.has(1) ? get_path(item, to_str(p.get_or(1, Value()))) : item);
        check_size(out.size());
    }
    charge(out.size() / 64);
    return Value::string(std::move(out));
}

Value f_list(const Value& v, CallArgs& a) {
    no_args("list", a);
    return Value::list(iterate(v));
}

Value f_lower(const Value& v, CallArgs& a) {
    no_args("lower", a);
    return same_flavor_string(v, text::lower(to_str(v)));
}

Value f_upper(const Value& v, CallArgs& a) {
    no_args("upper", a);
    return same_flavor_string(v, text::upper(to_str(v)));
}

// jinja2's title filter: the first letter of every word (words split at
// whitespace, '-', '(', '{', '[', '<') upper-cased, the rest lower-cased.
Value f_title(const Value& v, CallArgs& a) {
    no_args("title", a);
    const std::string s = to_str(v);
    std::string out;
    int previous = -1;  // 1: delimiter run, 0: word, -1: start
    for (size_t pos = 0; pos < s.size();) {
        const char32_t c = text::next_code_point(s, pos);
        const int delim = text::is_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
        if (delim != previous) {
            if (c == 0xDF) out += "SS";
            else text::append_utf8(out, text::to_upper(c));
        } else {
            text::append_utf8(out, text::to_lower(c));
        }
        previous = delim;
    }
    return same_flavor_string(v, std::move(out));
}

Value f_trim(const Value& v, CallArgs& a) {
    Params p("trim", a, {"chars"});
    if (p.has(0)) {
        const std::u32string chars = text::decode(to_str(p.get_or(0, Value())));
        return same_flavor_string(v, text::strip(to_str(v), true, true, &chars));
    }
    return same_flavor_string(v, text::strip(to_str(v), true, true));
}

// The function map/select/... apply to each item.
std::function<Value(const Value&)> item_filter(std::string_view fn, CallArgs& a) {
    if (a.positional.empty()) {
        const Value* attribute = a.find_named("attribute");
        if (!attribute) throw TemplateError(std::string(fn) + "() requires a filter name or attribute=");
        const Value* def = a.find_named("default");
        for (const auto& [k, x] : a.named)
            if (k != "attribute" && k != "default") throw TemplateError(std::string(fn) + "(): unexpected keyword argument '" + k + "'");
        const std::string path = to_str(*attribute);
        const Value default_value = def ? *def : Value::none();
        return [path, default_value](const Value& item) {
            Value v = get_path(item, path);
            return (v.is_undefined() && !default_value.is_none()) ? default_value : v;
        };
    }
    const std::string name = require_string(a.positional[0], "filter name");
    if (!is_filter(name)) throw TemplateError("no filter named '" + name + "'");
    CallArgs rest;
    rest.positional.assign(a.positional.begin() + 1, a.positional.end());
    rest.named = a.named;
    return [name, rest](const Value& item) {
        CallArgs args = rest;
        return apply_filter(name, item, args);
    };
}

Value f_map(const Value& v, CallArgs& a) {
    if (!truthy(v)) return Value::generator({});  // jinja2: `if value:` first, so None maps to nothing
    auto fn = item_filter("map", a);
    std::vector<Value> out;
    for (const Value& item : iterate(v)) out.push_back(fn(item));
    return Value::generator(std::move(out));
}

Value select_or_reject(const Value& v, CallArgs& a, bool select, bool by_attribute) {
    if (!truthy(v)) return Value::generator({});  // jinja2: `if value:` first, so None selects nothing
    size_t offset = 0;
    std::string path;
    if (by_attribute) {
        if (a.positional.empty()) throw TemplateError("missing the attribute name for selectattr/rejectattr");
        path = to_str(a.positional[0]);
        offset = 1;
    }
    std::string test;
    CallArgs test_args;
    if (a.positional.size() > offset) {
        test = require_string(a.positional[offset], "test name");
        if (!is_test(test)) throw TemplateError("no test named '" + test + "'");
        test_args.positional.assign(a.positional.begin() + static_cast<std::ptrdiff_t>(offset) + 1, a.positional.end());
        test_args.named = a.named;
    }
    std::vector<Value> out;
    for (const Value& item : iterate(v)) {
        const Value subject = by_attribute ? get_path(item, path) : item;
        bool passed;
        if (test.empty()) {
            passed = truthy(subject);
        } else {
            CallArgs args = test_args;
            passed = apply_test(test, subject, args);
        }
        if (passed == select) out.push_back(item);
    }
    return Value::generator(std::move(out));
}

Value f_select(const Value& v, CallArgs& a) { return select_or_reject(v, a, true, false); }
Value f_reject(const Value& v, CallArgs& a) { return select_or_reject(v, a, false, false); }
Value f_selectattr(const Value& v, CallArgs& a) { return select_or_reject(v, a, true, true); }
Value f_rejectattr(const Value& v, CallArgs& a) { return select_or_reject(v, a, false, true); }

Value min_or_max(const Value& v, CallArgs& a, bool want_max, std::string_view fn) {
    Params p(fn, a, {"case_sensitive", "attribute"});
    const bool case_sensitive = p.bool_or(0, false);
    const std::string path = p.string_or(1, "");
    std::vector<Value> items = iterate(v);
    if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
    auto key = [&](const Value& x) {
        Value k = path.empty() ? x : get_path(x, path);
        return case_sensitive ? k : lower_if_string(k);
    };
    size_t best = 0;
    for (size_t i = 1; i < items.size(); ++i) {
        const int c = compare(key(items[i]), key(items[best]));
        if (want_max ? c > 0 : c < 0) best = i;
    }
    return items[best];
}

Value f_max(const Value& v, CallArgs& a) { return min_or_max(v, a, true, "max"); }
Value f_min(const Value& v, CallArgs& a) { return min_or_max(v, a, false, "min"); }

Value f_replace(const Value& v, CallArgs& a) {
    Params p("replace", a, {"old", "new", "count"});
    const std::string s = to_str(v), old = to_str(p.required(0)), repl = to_str(p.required(1));
    int64_t count = p.int_or(2, -1);
    std::string out;
    if (old.empty()) {  // Python inserts `new` between all characters (and at both ends)
        size_t pos = 0;
        while (true) {
            if (count != 0) {
                out += repl;
                --count;
            }
            if (pos >= s.size()) break;
            const size_t start = pos;
            text::next_code_point(s, pos);
            out.append(s, start, pos - start);
            check_size(out.size());
        }
        return same_flavor_string(v, std::move(out));
    }
    size_t pos = 0;
    while (count != 0) {
        const size_t hit = s.find(old, pos);
        if (hit == std::string::npos) break;
        out.append(s, pos, hit - pos);
        out += repl;
        pos = hit + old.size();
        --count;
        check_size(out.size());
    }
    out.append(s, pos, std::string::npos);
    check_size(out.size());
    return same_flavor_string(v, std::move(out));
}

Value f_reverse(const Value& v, CallArgs& a) {
    no_args("reverse", a);
    if (v.is_string()) {
        std::u32string cps = text::decode(v.str());
        std::reverse(cps.begin(), cps.end());
        return same_flavor_string(v, text::encode(cps));
    }
    std::vector<Value> items = iterate(v);
    std::reverse(items.begin(), items.end());
    // reversed() of a list is an iterator; a generator has no reversed() and becomes a list.
    return v.kind() == Kind::Generator ? Value::list(std::move(items)) : Value::generator(std::move(items));
}

double python_round(double x, int64_t ndigits) {
    if (!std::isfinite(x) || ndigits > 300) return x;
    if (ndigits >= 0) {
        // printf rounds the exact binary value half-to-even, as Python's round() does.
        char buf[512];
        std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(ndigits), x);
        return std::strtod(buf, nullptr);
    }
    const double scale = std::pow(10.0, static_cast<double>(-ndigits));
    return std::nearbyint(x / scale) * scale;
}

Value f_round(const Value& v, CallArgs& a) {
    Params p("round", a, {"precision", "method"});
    const int64_t precision = p.int_or(0, 0);
    const std::string method = p.string_or(1, "common");
    if (method != "common" && method != "ceil" && method != "floor")
        throw TemplateError("round(): method must be common, ceil or floor");
    if (!v.is_number()) throw TemplateError(std::string("round(): a number is required, not ") + type_name(v));
    if (method == "common") {
        if (v.is_integral()) return Value::integer(v.int_value());
        return Value::number(python_round(v.float_value(), precision));
    }
    const double scale = std::pow(10.0, static_cast<double>(precision));
    const double x = v.float_value() * scale;
    return Value::number((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value f_safe(const Value& v, CallArgs& a) {
    no_args("safe", a);
    return Value::string(to_str(v), true);
}

Value f_sort(const Value& v, CallArgs& a) {
    Params p("sort", a, {"reverse", "case_sensitive", "attribute"});
    const bool reverse = p.bool_or(0, false), case_sensitive = p.bool_or(1, false);
    const std::string path = p.string_or(2, "");
    std::vector<Value> items = iterate(v);
    std::vector<Value> keys;
    for (const Value& x : items) {
        Value k = path.empty() ? x : get_path(x, path);
        keys.push_back(case_sensitive ? k : lower_if_string(k));
    }
    std::vector<size_t> order(items.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    charge(items.size() * 8);
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
        return reverse ? compare(keys[y], keys[x]) < 0 : compare(keys[x], keys[y]) < 0;
    });
    std::vector<Value> sorted;
    for (size_t i : order) sorted.push_back(items[i]);
    return Value::list(std::move(sorted));
}

Value f_string(const Value& v, CallArgs& a) {
    no_args("string", a);
    return v.is_string() ? v : Value::string(to_str(v));
}

Value f_sum(const Value& v, CallArgs& a) {
    Params p("sum", a, {"attribute", "start"});
    const std::string path = p.string_or(0, "");
    Value total = p.get_or(1, Value::integer(0));
    for (const Value& x : iterate(v)) total = binary_op("+", total, path.empty() ? x : get_path(x, path));
    return total;
}

// Hugging Face's tojson: json.dumps(x, ensure_ascii=False, indent=indent,
// separators=separators, sort_keys=sort_keys); no HTML escaping.
Value f_tojson(const Value& v, CallArgs& a) {
    Params p("tojson", a, {"indent", "separators", "sort_keys"});
    JsonStyle style;
    if (p.has(0)) {
        const Value indent = p.get_or(0, Value());
        if (indent.is_string()) style.indent = indent.str();
        else if (indent.is_integral())
            style.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(indent.int_value(), 0, 1024)), ' ');
        else throw TemplateError("tojson(): indent must be an integer or a string");
        style.item_separator = ",";
    }
    if (p.has(1)) {
        const Value seps = p.get_or(1, Value());
        if (!seps.is_sequence() || seps.items().size() != 2 || !seps.items()[0].is_string() || !seps.items()[1].is_string())
            throw TemplateError("tojson(): separators must be a pair of strings");
        style.item_separator = seps.items()[0].str();
        style.key_separator = seps.items()[1].str();
    }
    style.sort_keys = p.bool_or(2, false);
    return Value::string(to_json(v, style));
}

Value f_unique(const Value& v, CallArgs& a) {
    Params p("unique", a, {"case_sensitive", "attribute"});
    const bool case_sensitive = p.bool_or(0, false);
    const std::string path = p.string_or(1, "");
    std::unordered_set<std::string> seen;
    std::vector<Value> out;
    for (const Value& x : iterate(v)) {
        Value k = path.empty() ? x : get_path(x, path);
        if (!case_sensitive) k = lower_if_string(k);
        if (seen.insert(hash_key(k)).second) out.push_back(x);
    }
    return Value::generator(std::move(out));
}

Value f_wordcount(const Value& v, CallArgs& a) {
    no_args("wordcount", a);
    const std::string s = to_str(v);
    int64_t words = 0;
    bool in_word = false;
    for (size_t pos = 0; pos < s.size();) {
        const char32_t c = text::next_code_point(s, pos);
        const bool word_char = c == '_' || text::is_alnum(c);
        if (word_char && !in_word) ++words;
        in_word = word_char;
    }
    return Value::integer(words);
}

using FilterFn = Value (*)(const Value&, CallArgs&);

const std::map<std::string_view, FilterFn>& filters() {
    static const std::map<std::string_view, FilterFn> table = {
        {"abs", f_abs},         {"attr", f_attr},           {"batch", f_batch},       {"capitalize", f_capitalize},
        {"center", f_center},   {"count", f_length},        {"d", f_default},         {"default", f_default},
        {"dictsort", f_dictsort}, {"e", f_escape},          {"escape", f_escape},     {"first", f_first},
        {"float", f_float},     {"format", f_format},       {"indent", f_indent},     {"int", f_int},
        {"items", f_items},     {"join", f_join},           {"last", f_last},         {"length", f_length},
        {"list", f_list},       {"lower", f_lower},         {"map", f_map},           {"max", f_max},
        {"min", f_min},         {"reject", f_reject},       {"rejectattr", f_rejectattr}, {"replace", f_replace},
        {"reverse", f_reverse}, {"round", f_round},         {"safe", f_safe},         {"select", f_select},
        {"selectattr", f_selectattr}, {"sort", f_sort},     {"string", f_string},     {"sum", f_sum},
        {"title", f_title},     {"tojson", f_tojson},       {"trim", f_trim},         {"unique", f_unique},
        {"upper", f_upper},     {"wordcount", f_wordcount},
    };
    return table;
}

}  // namespace

// ---- public ------------------------------------------------------------------------------

bool is_filter(std::string_view name) { return filters().count(name) > 0; }

Value apply_filter(std::string_view name, const Value& input, CallArgs& args) {
    const auto it = filters().find(name);
    if (it == filters().end()) throw TemplateError("no filter named '" + std::string(name) + "'");
    return it->second(input, args);
}

}  // namespace minfer::jinja
