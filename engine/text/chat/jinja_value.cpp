// The dynamic value of the Jinja interpreter: its factories and accessors,
// the insertion-ordered Dict, and the per-render Budget. Python's semantics of
// values (str, ==, <, arithmetic, iteration, json.dumps) are in
// jinja_semantics.cpp.
#include "engine/text/chat/jinja_value.h"

#include <string>
#include <utility>

namespace minfer::jinja {

// ---- Value -------------------------------------------------------------------

Value Value::undefined(std::string hint) {
    Value v;
    v.s_ = std::move(hint);
    return v;
}

Value Value::none() { return Value(Kind::None); }

Value Value::boolean(bool b) {
    Value v(Kind::Bool);
    v.b_ = b;
    return v;
}

Value Value::integer(int64_t i) {
    Value v(Kind::Int);
    v.i_ = i;
    return v;
}

Value Value::number(double d) {
    Value v(Kind::Float);
    v.f_ = d;
    return v;
}

Value Value::string(std::string s, bool markup) {
    Value v(Kind::String);
    v.s_ = std::move(s);
    v.markup_ = markup;
    return v;
}

Value Value::list(std::vector<Value> items) {
    Value v(Kind::List);
    v.items_ = std::make_shared<const std::vector<Value>>(std::move(items));
    return v;
}

Value Value::tuple(std::vector<Value> items) {
    Value v = list(std::move(items));
    v.kind_ = Kind::Tuple;
    return v;
}

Value Value::generator(std::vector<Value> items) {
    Value v = list(std::move(items));
    v.kind_ = Kind::Generator;
    v.consumed_ = std::make_shared<bool>(false);
    return v;
}

Value Value::dict(Dict d) {
    Value v(Kind::Dict);
    v.dict_ = std::make_shared<Dict>(std::move(d));
    return v;
}

Value Value::make_namespace(std::shared_ptr<Dict> attrs) {
    Value v(Kind::Namespace);
    v.dict_ = std::move(attrs);
    return v;
}

Value Value::function(std::string name, std::function<Value(CallArgs&)> call) {
    Value v(Kind::Function);
    v.fn_ = std::make_shared<const Function>(Function{std::move(name), std::move(call)});
    return v;
}

const std::vector<Value>& Value::items() const {
    static const std::vector<Value> empty;
    return items_ ? *items_ : empty;
}

const Dict& Value::dict() const {
    static const Dict empty;
    return dict_ ? *dict_ : empty;
}

Dict& Value::namespace_attrs() const { return *dict_; }

const Function& Value::function() const { return *fn_; }

bool Value::consume() const {
    if (!consumed_ || *consumed_) return false;
    *consumed_ = true;
    return true;
}

bool Value::same_object(const Value& other) const {
    if (kind_ != other.kind_) return false;
    switch (kind_) {
        case Kind::Undefined:
        case Kind::None: return true;
        case Kind::Bool: return b_ == other.b_;
        case Kind::Int: return i_ == other.i_;
        case Kind::Float: return f_ == other.f_;
        case Kind::String: return s_ == other.s_;
        case Kind::List:
        case Kind::Tuple:
        case Kind::Generator: return items_ == other.items_;
        case Kind::Dict:
        case Kind::Namespace: return dict_ == other.dict_;
        case Kind::Function: return fn_ == other.fn_;
    }
    return false;
}

// ---- Dict ----------------------------------------------------------------------

const Value* Dict::find(std::string_view key) const {
    for (const auto& [k, v] : entries_)
        if (k.is_string() && k.str() == key) return &v;
    return nullptr;
}

const Value* Dict::find(const Value& key) const {
    if (key.is_string()) return find(std::string_view(key.str()));
    for (const auto& [k, v] : entries_)
        if (!k.is_string() && equal(k, key)) return &v;
    return nullptr;
}

void Dict::set(Value key, Value value) {
    for (auto& [k, v] : entries_) {
        if (equal(k, key)) {
            v = std::move(value);
            return;
        }
    }
    entries_.emplace_back(std::move(key), std::move(value));
}

const Value* CallArgs::find_named(std::string_view name) const {
    for (const auto& [k, v] : named)
        if (k == name) return &v;
    return nullptr;
}

// ---- Budget -----------------------------------------------------------------------

namespace {
// The budget of the render running on this thread. A render is synchronous and
// owns its Budget for its whole length, so a thread-local pointer is all the
// value operations need to reach it without threading it through every call.
thread_local Budget* t_current_budget = nullptr;
}  // namespace

Budget::Budget(const RenderLimits& limits) : limits_(limits), previous_(t_current_budget) { t_current_budget = this; }

Budget::~Budget() { t_current_budget = previous_; }

void Budget::charge(uint64_t steps) {
    steps_ += steps;
    if (steps_ > limits_.max_steps)
        throw TemplateError("the template ran too long (over " + std::to_string(limits_.max_steps) +
                            " steps): a loop over a huge range?");
}

Budget* Budget::current() { return t_current_budget; }

void charge(uint64_t steps) {
    if (t_current_budget) t_current_budget->charge(steps);
}

void check_size(size_t bytes_or_items) {
    const size_t max = t_current_budget ? t_current_budget->limits().max_string_bytes : (size_t(1) << 30);
    if (bytes_or_items > max)
        throw TemplateError("a string or list grew past the limit of " + std::to_string(max) + " bytes");
}

}  // namespace minfer::jinja
