// Python's semantics of Jinja values where chat templates depend on them:
// type names, truthiness, str() and repr(), ==, <, `in`, the arithmetic
// operators, iteration, %-formatting and json.dumps.
#include "engine/text/chat/jinja_value.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>

#include "engine/text/chat/jinja_text.h"

namespace minfer::jinja {

// ---- Python semantics ------------------------------------------------------------

namespace {

constexpr int kMaxNesting = 200;  // deeper values are refused rather than recursed into

void check_nesting(int depth) {
    if (depth > kMaxNesting) throw TemplateError("value nested too deeply");
}

[[noreturn]] void type_error(std::string_view op, const Value& a, const Value& b) {
    throw TemplateError("unsupported operand type(s) for " + std::string(op) + ": '" + type_name(a) + "' and '" +
                        type_name(b) + "'");
}

void append_str(std::string& out, const Value& v, bool as_repr, int depth) {
    check_nesting(depth);
    switch (v.kind()) {
        case Kind::Undefined: out += as_repr ? "Undefined" : ""; break;
        case Kind::None: out += "None"; break;
        case Kind::Bool: out += v.bool_value() ? "True" : "False"; break;
        case Kind::Int: out += std::to_string(v.int_value()); break;
        case Kind::Float: out += text::float_repr(v.float_value()); break;
        case Kind::String: out += as_repr ? text::python_quote(v.str()) : v.str(); break;
        case Kind::List:
        case Kind::Tuple: {
            const bool tuple = v.kind() == Kind::Tuple;
            out += tuple ? "(" : "[";
            const auto& items = v.items();
            for (size_t i = 0; i < items.size(); ++i) {
                if (i) out += ", ";
                append_str(out, items[i], true, depth + 1);
                check_size(out.size());
            }
            if (tuple && items.size() == 1) out += ",";
            out += tuple ? ")" : "]";
            break;
        }
        case Kind::Generator: out += "<generator object>"; break;
        case Kind::Dict:
        case Kind::Namespace: {
            if (v.kind() == Kind::Namespace) out += "<Namespace ";
            out += "{";
            bool first = true;
            for (const auto& [k, item] : v.dict().entries()) {
                if (!first) out += ", ";
                first = false;
                append_str(out, k, true, depth + 1);
                out += ": ";
                append_str(out, item, true, depth + 1);
                check_size(out.size());
            }
            out += "}";
            if (v.kind() == Kind::Namespace) out += ">";
            break;
        }
        case Kind::Function: out += "<function " + v.function().name + ">"; break;
    }
}

bool equal_at(const Value& a, const Value& b, int depth) {
    check_nesting(depth);
    if (a.is_number() && b.is_number()) {
        if (a.is_integral() && b.is_integral()) return a.int_value() == b.int_value();
        return a.float_value() == b.float_value();
    }
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
        case Kind::Undefined:
        case Kind::None: return true;
        case Kind::String: return a.str() == b.str();
        case Kind::List:
        case Kind::Tuple: {
            const auto& x = a.items();
            const auto& y = b.items();
            if (x.size() != y.size()) return false;
            charge(x.size());
            for (size_t i = 0; i < x.size(); ++i)
                if (!equal_at(x[i], y[i], depth + 1)) return false;
            return true;
        }
        case Kind::Dict: {
            if (a.dict().size() != b.dict().size()) return false;
            charge(a.dict().size());
            for (const auto& [k, v] : a.dict().entries()) {
                const Value* other = b.dict().find(k);
                if (!other || !equal_at(v, *other, depth + 1)) return false;
            }
            return true;
        }
        default: return a.same_object(b);
    }
}

int compare_at(const Value& a, const Value& b, int depth) {
    check_nesting(depth);
    if (a.is_number() && b.is_number()) {
        if (a.is_integral() && b.is_integral()) return a.int_value() < b.int_value() ? -1 : a.int_value() > b.int_value();
        const double x = a.float_value(), y = b.float_value();
        return x < y ? -1 : x > y;
    }
    if (a.is_string() && b.is_string()) {
        const int c = a.str().compare(b.str());  // UTF-8 byte order is code point order
        return c < 0 ? -1 : c > 0;
    }
    if ((a.kind() == Kind::List && b.kind() == Kind::List) || (a.kind() == Kind::Tuple && b.kind() == Kind::Tuple)) {
        const auto& x = a.items();
        const auto& y = b.items();
        for (size_t i = 0; i < x.size() && i < y.size(); ++i)
            if (!equal_at(x[i], y[i], depth + 1)) return compare_at(x[i], y[i], depth + 1);
        return x.size() < y.size() ? -1 : x.size() > y.size();
    }
    throw TemplateError(std::string("'<' not supported between instances of '") + type_name(a) + "' and '" +
                        type_name(b) + "'");
}

[[noreturn]] void overflow() { throw TemplateError("integer overflow (minfer's template integers are 64-bit)"); }

int64_t checked_add(int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) overflow();
    return r;
}
int64_t checked_sub(int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r)) overflow();
    return r;
}
int64_t checked_mul(int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r)) overflow();
    return r;
}

int64_t floor_div(int64_t a, int64_t b) {
    if (b == 0) throw TemplateError("integer division or modulo by zero");
    if (a == std::numeric_limits<int64_t>::min() && b == -1) overflow();
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
}

int64_t floor_mod(int64_t a, int64_t b) {
    if (b == 0) throw TemplateError("integer division or modulo by zero");
    if (b == -1) return 0;
    int64_t r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}

Value repeat(const Value& seq, int64_t times) {
    if (seq.is_string()) {
        const std::string& s = seq.str();
        if (times <= 0 || s.empty()) return Value::string("", seq.is_markup());
        if (static_cast<uint64_t>(times) > (uint64_t(1) << 40) / s.size()) check_size(SIZE_MAX);
        check_size(s.size() * static_cast<size_t>(times));
        charge(s.size() * static_cast<uint64_t>(times) / 64);
        std::string out;
        out.reserve(s.size() * static_cast<size_t>(times));
        for (int64_t i = 0; i < times; ++i) out += s;
        return Value::string(std::move(out), seq.is_markup());
    }
    const auto& items = seq.items();
    std::vector<Value> out;
    if (times > 0 && !items.empty()) {
        if (static_cast<uint64_t>(times) > (uint64_t(1) << 40) / items.size()) check_size(SIZE_MAX);
        check_size(items.size() * static_cast<size_t>(times));
        charge(items.size() * static_cast<uint64_t>(times));
        for (int64_t i = 0; i < times; ++i) out.insert(out.end(), items.begin(), items.end());
    }
    return seq.kind() == Kind::Tuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

Value concat_strings(const Value& a, const Value& b) {
    check_size(a.str().size() + b.str().size());
    charge((a.str().size() + b.str().size()) / 64);
    if (a.is_markup() || b.is_markup()) {
        // markupsafe.Markup: adding a plain str to a Markup escapes the str.
        std::string out = a.is_markup() ? a.str() : text::html_escape(a.str());
        out += b.is_markup() ? b.str() : text::html_escape(b.str());
        return Value::string(std::move(out), true);
    }
    return Value::string(a.str() + b.str());
}

Value arithmetic(std::string_view op, const Value& a, const Value& b) {
    const bool ints = a.is_integral() && b.is_integral();
    const int64_t x = a.int_value(), y = b.int_value();
    const double fx = a.float_value(), fy = b.float_value();
    if (op == "+") return ints ? Value::integer(checked_add(x, y)) : Value::number(fx + fy);
    if (op == "-") return ints ? Value::integer(checked_sub(x, y)) : Value::number(fx - fy);
    if (op == "*") return ints ? Value::integer(checked_mul(x, y)) : Value::number(fx * fy);
    if (op == "/") {
        if (fy == 0) throw TemplateError("division by zero");
        return Value::number(ints ? static_cast<double>(x) / static_cast<double>(y) : fx / fy);
    }
    if (op == "//") {
        if (ints) return Value::integer(floor_div(x, y));
        if (fy == 0) throw TemplateError("float floor division by zero");
        return Value::number(std::floor(fx / fy));
    }
    if (op == "%") {
        if (ints) return Value::integer(floor_mod(x, y));
        if (fy == 0) throw TemplateError("float modulo");
        double m = std::fmod(fx, fy);
        if (m != 0 && ((m < 0) != (fy < 0))) m += fy;
        return Value::number(m);
    }
    // "**"
    if (ints && y >= 0) {
        int64_t result = 1, base = x, e = y;
        while (e > 0) {
            if (e & 1) result = checked_mul(result, base);
            e >>= 1;
            if (e > 0) base = checked_mul(base, base);
        }
        return Value::integer(result);
    }
    if (fx == 0 && fy < 0) throw TemplateError("0.0 cannot be raised to a negative power");
    return Value::number(std::pow(fx, fy));
}

}  // namespace

const char* type_name(const Value& v) {
    switch (v.kind()) {
        case Kind::Undefined: return "Undefined";
        case Kind::None: return "NoneType";
        case Kind::Bool: return "bool";
        case Kind::Int: return "int";
        case Kind::Float: return "float";
        case Kind::String: return "str";
        case Kind::List: return "list";
        case Kind::Tuple: return "tuple";
        case Kind::Generator: return "generator";
        case Kind::Dict: return "dict";
        case Kind::Namespace: return "Namespace";
        case Kind::Function: return "function";
    }
    return "object";
}

void throw_undefined(const Value& v) {
    throw TemplateError(v.str().empty() ? std::string("value is undefined") : v.str());
}

bool truthy(const Value& v) {
    switch (v.kind()) {
        case Kind::Undefined:
        case Kind::None: return false;
        case Kind::Bool: return v.bool_value();
        case Kind::Int: return v.int_value() != 0;
        case Kind::Float: return v.float_value() != 0;
        case Kind::String: return !v.str().empty();
        case Kind::List:
        case Kind::Tuple: return !v.items().empty();
        case Kind::Dict: return !v.dict().empty();
        default: return true;  // generators, namespaces, functions
    }
}

std::string to_str(const Value& v) {
    if (v.is_string()) return v.str();
    std::string out;
    append_str(out, v, false, 0);
    return out;
}

std::string repr(const Value& v) {
    std::string out;
    append_str(out, v, true, 0);
    return out;
}

bool equal(const Value& a, const Value& b) { return equal_at(a, b, 0); }

int compare(const Value& a, const Value& b) { return compare_at(a, b, 0); }

std::vector<Value> iterate(const Value& v) {
    switch (v.kind()) {
        case Kind::Undefined: return {};
        case Kind::String: {
            std::vector<Value> chars;
            const std::string& s = v.str();
            for (size_t pos = 0; pos < s.size();) {
                const size_t start = pos;
                text::next_code_point(s, pos);
                chars.push_back(Value::string(s.substr(start, pos - start)));
            }
            charge(chars.size());
            return chars;
        }
        case Kind::List:
        case Kind::Tuple: charge(v.items().size()); return v.items();
        case Kind::Generator:
            if (!v.consume()) return {};
            charge(v.items().size());
            return v.items();
        case Kind::Dict: {
            std::vector<Value> keys;
            for (const auto& [k, item] : v.dict().entries()) keys.push_back(k);
            charge(keys.size());
            return keys;
        }
        default: throw TemplateError(std::string("'") + type_name(v) + "' object is not iterable");
    }
}

bool contains(const Value& container, const Value& item) {
    switch (container.kind()) {
        case Kind::Undefined: return false;
        case Kind::String:
            if (!item.is_string())
                throw TemplateError(std::string("'in <string>' requires string as left operand, not ") + type_name(item));
            charge(container.str().size() / 64);
            return container.str().find(item.str()) != std::string::npos;
        case Kind::List:
        case Kind::Tuple:
        case Kind::Generator:
            for (const Value& x : iterate(container))
                if (equal(x, item)) return true;
            return false;
        case Kind::Dict:
            if (item.kind() == Kind::List || item.kind() == Kind::Dict)
                throw TemplateError(std::string("unhashable type: '") + type_name(item) + "'");
            charge(container.dict().size());
            return container.dict().find(item) != nullptr;
        default:
            throw TemplateError(std::string("argument of type '") + type_name(container) + "' is not iterable");
    }
}

int64_t length(const Value& v) {
    switch (v.kind()) {
        case Kind::Undefined: return 0;
        case Kind::String: return static_cast<int64_t>(text::code_point_count(v.str()));
        case Kind::List:
        case Kind::Tuple: return static_cast<int64_t>(v.items().size());
        case Kind::Dict: return static_cast<int64_t>(v.dict().size());
        default: throw TemplateError(std::string("object of type '") + type_name(v) + "' has no len()");
    }
}

Value binary_op(std::string_view op, const Value& a, const Value& b) {
    if (a.is_undefined()) throw_undefined(a);
    if (b.is_undefined()) throw_undefined(b);
    if (a.is_number() && b.is_number()) return arithmetic(op, a, b);
    if (op == "+") {
        if (a.is_string() && b.is_string()) return concat_strings(a, b);
        if ((a.kind() == Kind::List && b.kind() == Kind::List) || (a.kind() == Kind::Tuple && b.kind() == Kind::Tuple)) {
            std::vector<Value> items = a.items();
            check_size(items.size() + b.items().size());
            charge(items.size() + b.items().size());
            items.insert(items.end(), b.items().begin(), b.items().end());
            return a.kind() == Kind::Tuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
        }
    } else if (op == "*") {
        const bool a_seq = a.is_string() || a.is_sequence(), b_seq = b.is_string() || b.is_sequence();
        if (a_seq && b.is_integral()) return repeat(a, b.int_value());
        if (b_seq && a.is_integral()) return repeat(b, a.int_value());
    } else if (op == "%" && a.is_string()) {
        return percent_format(a, b);
    }
    type_error(op, a, b);
}

Value negate(const Value& v) {
    if (v.kind() == Kind::Float) return Value::number(-v.float_value());
    if (v.is_integral()) {
        if (v.int_value() == std::numeric_limits<int64_t>::min()) overflow();
        return Value::integer(-v.int_value());
    }
    if (v.is_undefined()) throw_undefined(v);
    throw TemplateError(std::string("bad operand type for unary -: '") + type_name(v) + "'");
}

Value percent_format(const Value& format, const Value& args) {
    std::vector<Value> positional = args.kind() == Kind::Tuple ? args.items() : std::vector<Value>{args};
    const bool mapping = args.kind() == Kind::Dict;
    size_t next = 0;
    const std::string& f = format.str();
    std::string out;
    for (size_t i = 0; i < f.size(); ++i) {
        if (f[i] != '%') {
            out.push_back(f[i]);
            continue;
        }
        if (++i >= f.size()) throw TemplateError("incomplete format");
        const Value* arg = nullptr;
        if (f[i] == '(' && mapping) {
            const size_t close = f.find(')', i);
            if (close == std::string::npos) throw TemplateError("incomplete format key");
            arg = args.dict().find(std::string_view(f).substr(i + 1, close - i - 1));
            if (!arg) throw TemplateError("format key not found");
            i = close + 1;
        }
        std::string spec = "%";
        while (i < f.size() && std::string_view("-+ #0").find(f[i]) != std::string_view::npos) spec.push_back(f[i++]);
        while (i < f.size() && (std::isdigit(static_cast<unsigned char>(f[i])) || f[i] == '.')) spec.push_back(f[i++]);
        if (i >= f.size()) throw TemplateError("incomplete format");
        const char conv = f[i];
        if (conv == '%') {
            out.push_back('%');
            continue;
        }
        if (!arg) {
            if (mapping || next >= positional.size()) throw TemplateError("not enough arguments for format string");
            arg = &positional[next++];
        }
        char buf[512];
        if (conv == 's' || conv == 'r') {
            const std::string s = conv == 's' ? to_str(*arg) : repr(*arg);
            if (spec == "%") out += s;
            else {
                std::snprintf(buf, sizeof buf, (spec + "s").c_str(), s.c_str());
                out += buf;
            }
        } else if (conv == 'd' || conv == 'i' || conv == 'x' || conv == 'X' || conv == 'o') {
            if (!arg->is_number()) throw TemplateError(std::string("%") + conv + " format: a number is required");
            const int64_t n = arg->is_integral() ? arg->int_value() : static_cast<int64_t>(arg->float_value());
            std::snprintf(buf, sizeof buf, (spec + "ll" + (conv == 'i' ? 'd' : conv)).c_str(), static_cast<long long>(n));
            out += buf;
        } else if (conv == 'f' || conv == 'F' || conv == 'e' || conv == 'E' || conv == 'g' || conv == 'G') {
            if (!arg->is_number()) throw TemplateError(std::string("%") + conv + " format: a number is required");
            std::snprintf(buf, sizeof buf, (spec + conv).c_str(), arg->float_value());
            out += buf;
        } else {
            throw TemplateError(std::string("unsupported format character '") + conv + "'");
        }
        check_size(out.size());
    }
    if (!mapping && next < positional.size() && args.kind() == Kind::Tuple)
        throw TemplateError("not all arguments converted during string formatting");
    return Value::string(std::move(out), format.is_markup());
}

// ---- JSON ------------------------------------------------------------------------

namespace {

std::string json_key(const Value& k) {
    switch (k.kind()) {
        case Kind::String: return k.str();
        case Kind::Int: return std::to_string(k.int_value());
        case Kind::Float: return text::float_repr(k.float_value());
        case Kind::Bool: return k.bool_value() ? "true" : "false";
        case Kind::None: return "null";
        default:
            throw TemplateError(std::string("keys must be str, int, float, bool or None, not ") + type_name(k));
    }
}

void dump_json(std::string& out, const Value& v, const JsonStyle& style, int level) {
    check_nesting(level);
    check_size(out.size());
    auto newline = [&](int lvl) {
        if (!style.indent) return;
        out.push_back('\n');
        for (int i = 0; i < lvl; ++i) out += *style.indent;
    };
    // An array or object: "[]" when empty, else its items between separators,
    // one a line when indenting.
    auto container = [&](char open, char close, size_t size, auto&& dump_item) {
        out.push_back(open);
        if (size > 0) {
            newline(level + 1);
            for (size_t i = 0; i < size; ++i) {
                if (i) {
                    out += style.item_separator;
                    newline(level + 1);
                }
                dump_item(i);
            }
            newline(level);
        }
        out.push_back(close);
    };
    switch (v.kind()) {
        case Kind::None: out += "null"; return;
        case Kind::Bool: out += v.bool_value() ? "true" : "false"; return;
        case Kind::Int: out += std::to_string(v.int_value()); return;
        case Kind::Float: {
            const double d = v.float_value();
            if (std::isnan(d)) out += "NaN";
            else if (std::isinf(d)) out += d > 0 ? "Infinity" : "-Infinity";
            else out += text::float_repr(d);
            return;
        }
        case Kind::String: text::append_json_string(out, v.str()); return;
        case Kind::List:
        case Kind::Tuple: {
            const auto& items = v.items();
            container('[', ']', items.size(), [&](size_t i) { dump_json(out, items[i], style, level + 1); });
            return;
        }
        case Kind::Dict: {
            std::vector<const std::pair<Value, Value>*> entries;
            for (const auto& e : v.dict().entries()) entries.push_back(&e);
            if (style.sort_keys)
                std::stable_sort(entries.begin(), entries.end(),
                                 [](const auto* x, const auto* y) { return compare(x->first, y->first) < 0; });
            container('{', '}', entries.size(), [&](size_t i) {
                text::append_json_string(out, json_key(entries[i]->first));
                out += style.key_separator;
                dump_json(out, entries[i]->second, style, level + 1);
            });
            return;
        }
        default:
            throw TemplateError(std::string("Object of type ") + type_name(v) + " is not JSON serializable");
    }
}

}  // namespace

std::string to_json(const Value& v, const JsonStyle& style) {
    std::string out;
    dump_json(out, v, style, 0);
    check_size(out.size());
    charge(out.size() / 64);
    return out;
}

}  // namespace minfer::jinja
