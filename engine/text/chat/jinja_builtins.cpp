// Item lookup (get_item), slicing, and the global functions (range, dict,
// raise_exception, strftime_now). The filters, tests and methods declared in
// jinja_builtins.h are in jinja_filters.cpp, jinja_tests.cpp and jinja_methods.cpp.
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

// ---- globals ---------------------------------------------------------------------------

Value g_range(CallArgs& a) {
    if (!a.named.empty()) throw TemplateError("range() takes no keyword arguments");
    if (a.positional.empty() || a.positional.size() > 3)
        throw TemplateError("range() takes 1 to 3 arguments, got " + std::to_string(a.positional.size()));
    for (const Value& v : a.positional)
        if (!v.is_integral()) throw TemplateError(std::string("'") + type_name(v) + "' object cannot be interpreted as an integer");
    int64_t start = 0, stop = 0, step = 1;
    if (a.positional.size() == 1) stop = a.positional[0].int_value();
    else {
        start = a.positional[0].int_value();
        stop = a.positional[1].int_value();
        if (a.positional.size() == 3) step = a.positional[2].int_value();
    }
    if (step == 0) throw TemplateError("range() arg 3 must not be zero");
    constexpr int64_t kMaxRange = 100000;  // jinja2's sandbox refuses bigger ranges too
    std::vector<Value> out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (static_cast<int64_t>(out.size()) >= kMaxRange)
            throw TemplateError("range too big: the sandbox allows at most 100000 items");
        out.push_back(Value::integer(i));
        if ((step > 0 && i > std::numeric_limits<int64_t>::max() - step) ||
            (step < 0 && i < std::numeric_limits<int64_t>::min() - step))
            break;
    }
    charge(out.size());
    return Value::list(std::move(out));
}

Value g_dict(CallArgs& a) {
    Dict d;
    if (a.positional.size() > 1) throw TemplateError("dict() takes at most 1 positional argument");
    if (a.positional.size() == 1) {
        const Value& src = a.positional[0];
        if (src.kind() == Kind::Dict) {
            d = src.dict();
        } else {
            for (const Value& pair : iterate(src)) {
                if (!pair.is_sequence() || pair.items().size() != 2)
                    throw TemplateError("dict(): each element must be a key/value pair");
                d.set(pair.items()[0], pair.items()[1]);
            }
        }
    }
    for (const auto& [k, v] : a.named) d.set(Value::string(k), v);
    return Value::dict(std::move(d));
}

Value g_raise_exception(CallArgs& a) {
    Params p("raise_exception", a, {"message"});
    throw TemplateError(to_str(p.required(0)), 0, /*raised_by_template=*/true);
}

Value g_strftime_now(CallArgs& a) {
    Params p("strftime_now", a, {"format"});
    const std::string format = require_string(p.required(0), "strftime_now() format");
    if (format.empty()) return Value::string("");
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    for (size_t size = 256; size <= (1u << 20); size *= 4) {
        std::string buf(size, '\0');
        const size_t n = std::strftime(buf.data(), buf.size(), format.c_str(), &local);
        if (n > 0) {
            buf.resize(n);
            return Value::string(std::move(buf));
        }
    }
    return Value::string("");
}


}  // namespace

// ---- public ------------------------------------------------------------------------------

Value get_item(const Value& object, const Value& key) {
    switch (object.kind()) {
        case Kind::Undefined: throw_undefined(object);
        case Kind::List:
        case Kind::Tuple:
        case Kind::String:
            if (key.is_integral()) {
                std::u32string cps;
                if (object.is_string()) cps = text::decode(object.str());
                const int64_t n = object.is_string() ? static_cast<int64_t>(cps.size()) : static_cast<int64_t>(object.items().size());
                int64_t i = key.int_value();
                if (i < 0) i += n;
                if (i < 0 || i >= n)
                    return Value::undefined("'" + std::string(type_name(object)) + " object' has no element " +
                                            std::to_string(key.int_value()));
                if (object.is_string()) return Value::string(text::encode(std::u32string_view(cps).substr(static_cast<size_t>(i), 1)));
                return object.items()[static_cast<size_t>(i)];
            }
            break;
        case Kind::Dict:
            if (const Value* v = object.dict().find(key)) return *v;
            break;
        default: break;
    }
    if (key.is_string()) return get_attribute(object, key.str());
    return Value::undefined("'" + std::string(type_name(object)) + " object' has no element " + repr(key));
}

Value slice(const Value& object, const Value& start_v, const Value& stop_v, const Value& step_v) {
    if (object.is_undefined()) throw_undefined(object);
    auto index_or_none = [](const Value& v) -> std::optional<int64_t> {
        if (v.is_undefined() || v.is_none()) return std::nullopt;
        if (!v.is_integral()) throw TemplateError("slice indices must be integers or None");
        return v.int_value();
    };
    const std::optional<int64_t> start_opt = index_or_none(start_v), stop_opt = index_or_none(stop_v);
    const int64_t step = index_or_none(step_v).value_or(1);
    if (step == 0) throw TemplateError("slice step cannot be zero");
    if (!object.is_string() && !object.is_sequence())
        return Value::undefined("'" + std::string(type_name(object)) + " object' cannot be sliced");
    std::u32string cps;
    if (object.is_string()) cps = text::decode(object.str());
    const int64_t n = object.is_string() ? static_cast<int64_t>(cps.size()) : static_cast<int64_t>(object.items().size());
    // Python's PySlice_AdjustIndices.
    auto adjust = [&](std::optional<int64_t> v, int64_t if_missing) {
        if (!v) return if_missing;
        int64_t x = *v;
        if (x < 0) {
            x += n;
            if (x < 0) x = step < 0 ? -1 : 0;
        } else if (x >= n) {
            x = step < 0 ? n - 1 : n;
        }
        return x;
    };
    const int64_t start = adjust(start_opt, step < 0 ? n - 1 : 0);
    const int64_t stop = adjust(stop_opt, step < 0 ? -1 : n);
    std::vector<int64_t> picks;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) picks.push_back(i);
    charge(picks.size());
    if (object.is_string()) {
        std::u32string out;
        for (int64_t i : picks) out.push_back(cps[static_cast<size_t>(i)]);
        return Value::string(text::encode(out), object.is_markup());
    }
    std::vector<Value> out;
    for (int64_t i : picks) out.push_back(object.items()[static_cast<size_t>(i)]);
    return object.kind() == Kind::Tuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

std::vector<std::pair<std::string, Value>> builtin_globals() {
    return {
        {"range", Value::function("range", g_range)},
        {"dict", Value::function("dict", g_dict)},
        {"raise_exception", Value::function("raise_exception", g_raise_exception)},
        {"strftime_now", Value::function("strftime_now", g_strftime_now)},
    };
}


}  // namespace minfer::jinja
