// The dynamic value of the Jinja interpreter, and Python's semantics of it
// where chat templates depend on them: truthiness, str(), ==, <, `in`, the
// arithmetic operators, iteration and json.dumps.
//
// Lists, tuples and dicts are immutable once built (Hugging Face renders chat
// templates in jinja2's ImmutableSandboxedEnvironment), so values share them.
// A namespace() is the one mutable object: `{% set ns.x = 1 %}`.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace minfer::jinja {

// Any error while loading or rendering a template. `line` is 0 until the
// interpreter knows which template line the error belongs to.
struct TemplateError : std::runtime_error {
    explicit TemplateError(const std::string& message, int line = 0, bool raised_by_template = false)
        : std::runtime_error(message), line(line), raised_by_template(raised_by_template) {}
    int line;
    bool raised_by_template;  // raise_exception(msg): the message is the template's own words
};

class Value;
class Dict;
struct Function;
struct CallArgs;

enum class Kind : uint8_t {
    Undefined,  // a missing variable, attribute or item: renders as "", iterates as empty
    None,
    Bool,
    Int,
    Float,
    String,
    List,
    Tuple,
    Generator,  // what map/select/reject/unique/items return in jinja2: iterable once, no len(), not JSON
    Dict,
    Namespace,
    Function,  // macros, built-in functions, bound methods
};

class Value {
public:
    Value() = default;  // undefined

    static Value undefined(std::string hint = {});
    static Value none();
    static Value boolean(bool b);
    static Value integer(int64_t i);
    static Value number(double d);
    static Value string(std::string s, bool markup = false);
    static Value list(std::vector<Value> items);
    static Value tuple(std::vector<Value> items);
    static Value generator(std::vector<Value> items);
    static Value dict(Dict d);
    static Value make_namespace(std::shared_ptr<Dict> attrs);
    static Value function(std::string name, std::function<Value(CallArgs&)> call);

    Kind kind() const { return kind_; }
    bool is_undefined() const { return kind_ == Kind::Undefined; }
    bool is_none() const { return kind_ == Kind::None; }
    bool is_string() const { return kind_ == Kind::String; }
    bool is_number() const { return kind_ == Kind::Bool || kind_ == Kind::Int || kind_ == Kind::Float; }
    bool is_integral() const { return kind_ == Kind::Bool || kind_ == Kind::Int; }  // Python: bool is an int
    bool is_sequence() const { return kind_ == Kind::List || kind_ == Kind::Tuple; }
    bool is_markup() const { return markup_; }  // a string from |safe or |escape (markupsafe.Markup)

    bool bool_value() const { return b_; }
    int64_t int_value() const { return kind_ == Kind::Bool ? (b_ ? 1 : 0) : i_; }
    double float_value() const { return kind_ == Kind::Float ? f_ : static_cast<double>(int_value()); }
    const std::string& str() const { return s_; }  // String text (Undefined: its hint)
    const std::vector<Value>& items() const;     // List, Tuple, Generator
    const Dict& dict() const;                    // Dict, Namespace
    Dict& namespace_attrs() const;               // Namespace (mutable through the shared handle)
    const std::shared_ptr<Dict>& dict_handle() const { return dict_; }
    const Function& function() const;
    // Generators are single-pass: the first consume() gets the items, later ones nothing.
    bool consume() const;
    // Python `is`: the same object (for containers), the same constant otherwise.
    bool same_object(const Value& other) const;

private:
    // The factories above start from an empty value of their kind.
    explicit Value(Kind kind) : kind_(kind) {}

    Kind kind_ = Kind::Undefined;
    bool markup_ = false;
    bool b_ = false;
    int64_t i_ = 0;
    double f_ = 0;
    std::string s_;
    std::shared_ptr<const std::vector<Value>> items_;
    std::shared_ptr<Dict> dict_;
    std::shared_ptr<const Function> fn_;
    std::shared_ptr<bool> consumed_;
};

// A dict that keeps insertion order (Python 3.7+). Keys are compared with ==,
// so 1, 1.0 and True are one key, as in Python.
class Dict {
public:
    const Value* find(const Value& key) const;
    const Value* find(std::string_view key) const;
    void set(Value key, Value value);  // replaces in place, or appends
    void clear() { entries_.clear(); }
    size_t size() const { return entries_.size(); }
    bool empty() const { return entries_.empty(); }
    const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }

private:
    std::vector<std::pair<Value, Value>> entries_;
};

struct CallArgs {
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> named;
    const Value* find_named(std::string_view name) const;
};

struct Function {
    std::string name;
    std::function<Value(CallArgs&)> call;
};

// ---- Python semantics -------------------------------------------------------

const char* type_name(const Value& v);       // Python's: 'str', 'int', 'NoneType', 'dict', ...
[[noreturn]] void throw_undefined(const Value& v);  // jinja2's UndefinedError for using an undefined value

bool truthy(const Value& v);
std::string to_str(const Value& v);  // str(v); undefined is ""
std::string repr(const Value& v);    // repr(v), for str() of lists and dicts
bool equal(const Value& a, const Value& b);  // ==
int compare(const Value& a, const Value& b);  // <0, 0, >0; throws TypeError as Python does for '<'
std::vector<Value> iterate(const Value& v);  // for x in v: chars of a string, keys of a dict
bool contains(const Value& container, const Value& item);  // item in container
int64_t length(const Value& v);  // len(v); undefined has 0
Value binary_op(std::string_view op, const Value& a, const Value& b);  // + - * / // % **
Value negate(const Value& v);
Value percent_format(const Value& format, const Value& args);  // "%s and %d" % (a, b)

struct JsonStyle {
    std::optional<std::string> indent;  // json.dumps(indent=...): None is one line
    std::string item_separator = ", ";  // json.dumps' defaults, (",", ": ") once indented
    std::string key_separator = ": ";
    bool sort_keys = false;
};
std::string to_json(const Value& v, const JsonStyle& style);

// ---- the budget of the running render -----------------------------------------
//
// Every render gets one (see Interpreter): a loop over range(100000) inside
// another, or a string doubled in a loop, ends in an error instead of running
// for hours or eating the memory. The value operations above charge it
// through these two calls; outside a render they charge nothing.

struct RenderLimits {
    uint64_t max_steps = 5'000'000;       // nodes evaluated, items iterated, bytes built / 64 (~1 s)
    size_t max_string_bytes = 64u << 20;   // any one string or list, and the output
    int max_depth = 400;                   // nested evaluation (expressions, blocks, macro calls)
    int max_macro_depth = 100;             // nested macro calls
};

class Budget {
public:
    explicit Budget(const RenderLimits& limits);
    ~Budget();
    Budget(const Budget&) = delete;
    Budget& operator=(const Budget&) = delete;
    const RenderLimits& limits() const { return limits_; }
    void charge(uint64_t steps);
    static Budget* current();

private:
    RenderLimits limits_;
    uint64_t steps_ = 0;
    Budget* previous_;
};

void charge(uint64_t steps);
void check_size(size_t bytes_or_items);  // throws when a string or list would pass the limit

}  // namespace minfer::jinja
