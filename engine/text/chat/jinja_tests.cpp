// jinja2's tests (`x is defined`, `x is divisibleby 3`, ...): is_test and apply_test.
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

// ---- tests -------------------------------------------------------------------------

const Value& test_arg(std::string_view test, CallArgs& a) {
    Params p(test, a, {"other"});
    return p.required(0);
}

bool is_odd_or_even(const Value& v, bool odd) {
    if (!v.is_number()) throw TemplateError(std::string("cannot test whether a ") + type_name(v) + " is odd or even");
    const Value r = binary_op("%", v, Value::integer(2));
    return truthy(r) == odd;
}

bool apply_known_test(std::string_view name, const Value& v, CallArgs& a) {
    if (name == "defined") return !v.is_undefined();
    if (name == "undefined") return v.is_undefined();
    if (name == "none") return v.is_none();
    if (name == "boolean") return v.kind() == Kind::Bool;
    if (name == "true") return v.kind() == Kind::Bool && v.bool_value();
    if (name == "false") return v.kind() == Kind::Bool && !v.bool_value();
    if (name == "integer") return v.kind() == Kind::Int;
    if (name == "float") return v.kind() == Kind::Float;
    if (name == "number") return v.is_number();
    if (name == "string") return v.is_string();
    if (name == "mapping") return v.kind() == Kind::Dict;
    if (name == "callable") return v.kind() == Kind::Function;
    if (name == "iterable")
        return v.is_undefined() || v.is_string() || v.is_sequence() || v.kind() == Kind::Generator || v.kind() == Kind::Dict;
    if (name == "sequence") return v.is_undefined() || v.is_string() || v.is_sequence() || v.kind() == Kind::Dict;
    if (name == "escaped") return v.is_markup();
    if (name == "odd") return is_odd_or_even(v, true);
    if (name == "even") return is_odd_or_even(v, false);
    if (name == "lower") return v.is_string() && text::lower(v.str()) == v.str();
    if (name == "upper") return v.is_string() && text::upper(v.str()) == v.str();
    if (name == "filter") return v.is_string() && is_filter(v.str());
    if (name == "test") return v.is_string() && is_test(v.str());
    if (name == "divisibleby") return !truthy(binary_op("%", v, test_arg(name, a)));
    if (name == "eq" || name == "equalto") return equal(v, test_arg(name, a));
    if (name == "ne") return !equal(v, test_arg(name, a));
    if (name == "lt" || name == "lessthan") return compare(v, test_arg(name, a)) < 0;
    if (name == "le") return compare(v, test_arg(name, a)) <= 0;
    if (name == "gt" || name == "greaterthan") return compare(v, test_arg(name, a)) > 0;
    if (name == "ge") return compare(v, test_arg(name, a)) >= 0;
    if (name == "in") return contains(test_arg(name, a), v);
    if (name == "sameas") return v.same_object(test_arg(name, a));
    throw TemplateError("no test named '" + std::string(name) + "'");
}

constexpr std::string_view kTests[] = {
    "boolean", "callable", "defined",  "divisibleby", "eq",     "equalto", "escaped", "even",     "false",
    "filter",  "float",    "ge",       "greaterthan", "gt",     "in",      "integer", "iterable", "le",
    "lessthan", "lower",   "lt",       "mapping",     "ne",     "none",    "number",  "odd",      "sameas",
    "sequence", "string",  "test",     "true",        "undefined", "upper",
};

}  // namespace

// ---- public ------------------------------------------------------------------------------

bool is_test(std::string_view name) { return in_table(kTests, name); }

bool apply_test(std::string_view name, const Value& value, CallArgs& args) { return apply_known_test(name, value, args); }

}  // namespace minfer::jinja
