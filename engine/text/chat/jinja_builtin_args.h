// The argument handling shared by the built-in filters, methods and globals
// (jinja_filters.cpp, jinja_methods.cpp, jinja_builtins.cpp): Python-style
// binding of a call's arguments to parameter names, small checks on them,
// and the names of the str, dict and list methods.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "engine/text/chat/jinja_value.h"

namespace minfer::jinja {

// Binds a call's arguments to parameter names, as Python binds them to a def
// whose parameters all have defaults: too many, unknown or doubled ones are errors.
class Params {
public:
    Params(std::string_view fn, const CallArgs& args, std::initializer_list<std::string_view> names)
        : fn_(fn), names_(names), slots_(names.size(), nullptr) {
        if (args.positional.size() > names.size())
            throw TemplateError(fn_ + "() takes at most " + std::to_string(names.size()) + " argument(s), got " +
                                std::to_string(args.positional.size()));
        for (size_t i = 0; i < args.positional.size(); ++i) slots_[i] = &args.positional[i];
        for (const auto& [key, value] : args.named) {
            const auto it = std::find(names_.begin(), names_.end(), key);
            if (it == names_.end()) throw TemplateError(fn_ + "() got an unexpected keyword argument '" + key + "'");
            const size_t i = static_cast<size_t>(it - names_.begin());
            if (slots_[i]) throw TemplateError(fn_ + "() got multiple values for argument '" + key + "'");
            slots_[i] = &value;
        }
    }

    // Given, and not None (None means "use the default" for every parameter here).
    bool has(size_t i) const { return slots_[i] && !slots_[i]->is_none() && !slots_[i]->is_undefined(); }
    Value get_or(size_t i, Value def) const { return has(i) ? *slots_[i] : def; }
    const Value& required(size_t i) const {
        if (!slots_[i]) throw TemplateError(fn_ + "() missing required argument '" + std::string(names_[i]) + "'");
        return *slots_[i];
    }
    int64_t int_or(size_t i, int64_t def) const {
        if (!has(i)) return def;
        if (!slots_[i]->is_integral())
            throw TemplateError(fn_ + "(): '" + std::string(names_[i]) + "' must be an integer, not " + type_name(*slots_[i]));
        return slots_[i]->int_value();
    }
    const Value* given(size_t i) const { return slots_[i]; }  // as passed, None included
    bool bool_or(size_t i, bool def) const { return slots_[i] ? truthy(*slots_[i]) : def; }
    std::string string_or(size_t i, std::string def) const { return has(i) ? to_str(*slots_[i]) : def; }

private:
    std::string fn_;
    std::vector<std::string_view> names_;
    std::vector<const Value*> slots_;
};

inline void no_args(std::string_view fn, const CallArgs& args) { Params(fn, args, {}); }

inline std::string require_string(const Value& v, std::string_view what) {
    if (!v.is_string()) throw TemplateError(std::string(what) + " must be a string, not " + type_name(v));
    return v.str();
}

inline Value same_flavor_string(const Value& like, std::string s) { return Value::string(std::move(s), like.is_markup()); }

// The methods of str, dict and list a template can call (see call_method).
inline constexpr std::string_view kStringMethods[] = {
    "capitalize", "count", "endswith", "find", "format", "index", "isalnum", "isalpha", "isdigit", "islower",
    "isspace", "isupper", "join", "lower", "lstrip", "removeprefix", "removesuffix", "replace", "rfind", "rsplit",
    "rstrip", "split", "splitlines", "startswith", "strip", "title", "upper",
};
inline constexpr std::string_view kDictMethods[] = {"get", "items", "keys", "values"};
inline constexpr std::string_view kListMethods[] = {"count", "index"};

template <size_t N>
inline bool in_table(const std::string_view (&table)[N], std::string_view name) {
    return std::find(std::begin(table), std::end(table), name) != std::end(table);
}

}  // namespace minfer::jinja
