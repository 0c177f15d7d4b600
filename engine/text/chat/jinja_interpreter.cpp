#include "engine/text/chat/jinja_interpreter.h"

#include <memory>
#include <unordered_map>

#include "engine/text/chat/jinja_builtins.h"

namespace minfer::jinja {

namespace {

struct Scope {
    Scope* parent = nullptr;
    bool captured = false;  // a macro or caller() defined here holds on to it
    std::unordered_map<std::string, Value> vars;

    const Value* lookup(const std::string& name) const {
        for (const Scope* s = this; s; s = s->parent) {
            const auto it = s->vars.find(name);
            if (it != s->vars.end()) return &it->second;
        }
        return nullptr;
    }
};

enum class Flow { Normal, Break, Continue };

class Interpreter {
public:
    explicit Interpreter(const RenderLimits& limits) : budget_(limits), limits_(limits) {}

    ~Interpreter() {
        // A namespace can hold itself ({% set ns.me = ns %}) or a value that
        // holds it; emptying them all breaks every such reference cycle.
        for (const auto& weak : namespaces_)
            if (auto ns = weak.lock()) ns->clear();
    }

    std::string render(const Program& program, const std::vector<std::pair<std::string, Value>>& variables) {
        Scope* root = push_scope(nullptr);
        for (auto& [name, value] : builtin_globals()) root->vars[name] = std::move(value);
        root->vars["namespace"] = Value::function("namespace", [this](CallArgs& a) { return make_namespace(a); });
        for (const auto& [name, value] : variables) root->vars[name] = value;
        std::string out;
        exec_block(program.body, root, out);
        return out;
    }

private:
    // ---- bookkeeping ----

    // Scopes live in a stack that owns them; one that a closure captured stays
    // until the render ends (closures hold plain pointers to their scope).
    Scope* push_scope(Scope* parent) {
        scopes_.push_back(std::make_unique<Scope>());
        scopes_.back()->parent = parent;
        return scopes_.back().get();
    }
    void pop_scope(Scope* s) {
        if (!scopes_.empty() && scopes_.back().get() == s && !s->captured) scopes_.pop_back();
    }
    struct ScopeGuard {
        Interpreter& in;
        Scope* scope;
        ~ScopeGuard() { in.pop_scope(scope); }
    };
    static void capture(Scope* s) {
        for (; s; s = s->parent) s->captured = true;
    }

    struct DepthGuard {
        explicit DepthGuard(Interpreter& in) : in(in) {
            if (++in.depth_ > in.limits_.max_depth) {
                --in.depth_;
                throw TemplateError("template nested too deeply (over " + std::to_string(in.limits_.max_depth) +
                                    " levels of blocks, expressions and macro calls)");
            }
        }
        ~DepthGuard() { --in.depth_; }
        Interpreter& in;
    };

    void emit(std::string& out, std::string_view s) {
        out += s;
        if (out.size() > limits_.max_string_bytes)
            throw TemplateError("the output grew past the limit of " + std::to_string(limits_.max_string_bytes) + " bytes");
        budget_.charge(s.size() / 64);
    }

    // ---- statements ----

    Flow exec_block(const NodeList& nodes, Scope* scope, std::string& out) {
        for (const auto& n : nodes) {
            const Flow f = exec(*n, scope, out);
            if (f != Flow::Normal) return f;
        }
        return Flow::Normal;
    }

    Flow exec(const Node& n, Scope* scope, std::string& out) {
        DepthGuard depth(*this);
        budget_.charge(1);
        try {
            return exec_node(n, scope, out);
        } catch (TemplateError& e) {
            if (e.line == 0) e.line = n.line;
            throw;
        }
    }

    Flow exec_node(const Node& n, Scope* scope, std::string& out) {
        switch (n.kind) {
            case NodeKind::Text: emit(out, n.text); return Flow::Normal;
            case NodeKind::Output: emit(out, to_str(eval(*n.expr, scope))); return Flow::Normal;
            case NodeKind::If:
                for (const auto& [condition, body] : n.branches)
                    if (truthy(eval(*condition, scope))) return exec_block(body, scope, out);
                return exec_block(n.else_body, scope, out);
            case NodeKind::For: return exec_for(n, scope, out);
            case NodeKind::Set: assign(scope, n, eval(*n.expr, scope)); return Flow::Normal;
            case NodeKind::SetBlock: {
                Value v = Value::string(render_body(n.body, scope));
                if (n.filter) v = eval_filter(*n.filter, scope, &v);
                assign(scope, n, std::move(v));
                return Flow::Normal;
            }
            case NodeKind::Macro: {
                capture(scope);
                const Node* macro = &n;
                scope->vars[n.name] = Value::function(n.name, [this, macro, scope](CallArgs& args) {
                    return call_macro(*macro, scope, args);
                });
                return Flow::Normal;
            }
            case NodeKind::CallBlock: {
                const Expr& call = *n.expr;
                const Value callee = eval(*call.object, scope);
                CallArgs args = eval_args(call, scope);
                capture(scope);
                const Node* block = &n;
                args.named.emplace_back("caller", Value::function("caller", [this, block, scope](CallArgs& a) {
                                            return call_macro(*block, scope, a);
                                        }));
                emit(out, to_str(call_value(callee, args)));
                return Flow::Normal;
            }
            case NodeKind::FilterBlock: {
                const Value body = Value::string(render_body(n.body, scope));
                emit(out, to_str(eval_filter(*n.filter, scope, &body)));
                return Flow::Normal;
            }
            case NodeKind::With: {
                Scope* inner = push_scope(scope);
                ScopeGuard guard{*this, inner};
                for (const auto& [name, value] : n.params) inner->vars[name] = eval(*value, scope);
                return exec_block(n.body, inner, out);
            }
            case NodeKind::Break: return Flow::Break;
            case NodeKind::Continue: return Flow::Continue;
        }
        return Flow::Normal;
    }

    std::string render_body(const NodeList& body, Scope* scope) {
        Scope* inner = push_scope(scope);
        ScopeGuard guard{*this, inner};
        std::string text;
        exec_block(body, inner, text);
        return text;
    }

    void bind_targets(Scope* scope, const std::vector<std::string>& targets, const Value& value) {
        if (targets.size() == 1) {
            scope->vars[targets[0]] = value;
            return;
        }
        if (!value.is_string() && !value.is_sequence() && value.kind() != Kind::Dict && value.kind() != Kind::Generator)
            throw TemplateError(std::string("cannot unpack non-iterable ") + type_name(value) + " object");
        const std::vector<Value> items = iterate(value);
        if (items.size() != targets.size())
            throw TemplateError((items.size() > targets.size() ? "too many values to unpack (expected "
                                                               : "not enough values to unpack (expected ") +
                                std::to_string(targets.size()) + ", got " + std::to_string(items.size()) + ")");
        for (size_t i = 0; i < targets.size(); ++i) scope->vars[targets[i]] = items[i];
    }

    void assign(Scope* scope, const Node& n, Value value) {
        if (!n.attribute.empty()) {
            const Value* ns = scope->lookup(n.targets[0]);
            if (!ns || ns->kind() != Kind::Namespace)
                throw TemplateError("cannot assign attribute '" + n.attribute + "' on '" + n.targets[0] +
                                    "': it is not a namespace()");
            ns->namespace_attrs().set(Value::string(n.attribute), std::move(value));
            return;
        }
        bind_targets(scope, n.targets, value);
    }

    // loop.index, loop.first, loop.cycle(...) and friends for item i of n.
    static Value loop_object(const std::vector<Value>& items, size_t i) {
        const auto n = static_cast<int64_t>(items.size());
        const auto k = static_cast<int64_t>(i);
        Dict d;
        d.set(Value::string("index"), Value::integer(k + 1));
        d.set(Value::string("index0"), Value::integer(k));
        d.set(Value::string("revindex"), Value::integer(n - k));
        d.set(Value::string("revindex0"), Value::integer(n - k - 1));
        d.set(Value::string("first"), Value::boolean(k == 0));
        d.set(Value::string("last"), Value::boolean(k == n - 1));
        d.set(Value::string("length"), Value::integer(n));
        d.set(Value::string("depth"), Value::integer(1));
        d.set(Value::string("depth0"), Value::integer(0));
        if (i > 0) d.set(Value::string("previtem"), items[i - 1]);
        if (i + 1 < items.size()) d.set(Value::string("nextitem"), items[i + 1]);
        d.set(Value::string("cycle"), Value::function("cycle", [i](CallArgs& a) {
                  if (a.positional.empty()) throw TemplateError("no items for cycling given");
                  return a.positional[i % a.positional.size()];
              }));
        return Value::dict(std::move(d));
    }

    Flow exec_for(const Node& n, Scope* scope, std::string& out) {
        std::vector<Value> items = iterate(eval(*n.expr, scope));
        if (n.condition) {  // for x in xs if cond: filtered first, so loop.length counts what is kept
            std::vector<Value> kept;
            for (Value& item : items) {
                Scope* s = push_scope(scope);
                ScopeGuard guard{*this, s};
                bind_targets(s, n.targets, item);
                if (truthy(eval(*n.condition, s))) kept.push_back(std::move(item));
            }
            items = std::move(kept);
        }
        if (items.empty()) {
            Scope* s = push_scope(scope);
            ScopeGuard guard{*this, s};
            return exec_block(n.else_body, s, out);
        }
        for (size_t i = 0; i < items.size(); ++i) {
            budget_.charge(4);  // an iteration's scope and loop object cost more than a plain step
            Scope* s = push_scope(scope);
            ScopeGuard guard{*this, s};
            bind_targets(s, n.targets, items[i]);
            s->vars["loop"] = loop_object(items, i);
            if (exec_block(n.body, s, out) == Flow::Break) break;
        }
        return Flow::Normal;
    }

    // A macro (or a call block's body, as caller()) called with `args`.
    Value call_macro(const Node& macro, Scope* defining_scope, CallArgs& args) {
        if (macro_depth_ >= limits_.max_macro_depth)
            throw TemplateError("macro calls nested too deeply (over " + std::to_string(limits_.max_macro_depth) +
                                "): runaway recursion in '" + (macro.name.empty() ? "caller" : macro.name) + "'?");
        ++macro_depth_;
        struct Exit {
            int& depth;
            ~Exit() { --depth; }
        } exit{macro_depth_};
        Scope* s = push_scope(defining_scope);
        ScopeGuard guard{*this, s};
        std::vector<Value> varargs;
        Dict kwargs;
        for (size_t i = 0; i < macro.params.size(); ++i) {
            const auto& [name, default_value] = macro.params[i];
            if (i < args.positional.size()) s->vars[name] = args.positional[i];
            else if (const Value* v = args.find_named(name)) s->vars[name] = *v;
            else if (default_value) s->vars[name] = eval(*default_value, s);  // may use the parameters before it
            else s->vars[name] = Value::undefined("parameter '" + name + "' was not provided");
        }
        for (size_t i = macro.params.size(); i < args.positional.size(); ++i) varargs.push_back(args.positional[i]);
        for (const auto& [name, value] : args.named) {
            if (name == "caller") {
                s->vars["caller"] = value;
                continue;
            }
            bool is_param = false;
            for (const auto& p : macro.params) is_param = is_param || p.first == name;
            if (!is_param) kwargs.set(Value::string(name), value);
        }
        s->vars["varargs"] = Value::tuple(std::move(varargs));
        s->vars["kwargs"] = Value::dict(std::move(kwargs));
        std::string text;
        exec_block(macro.body, s, text);
        return Value::string(std::move(text));
    }

    Value make_namespace(CallArgs& args) {
        auto attrs = std::make_shared<Dict>();
        for (const Value& p : args.positional) {
            if (p.kind() != Kind::Dict) throw TemplateError("namespace() takes a dict or keyword arguments");
            for (const auto& [k, v] : p.dict().entries()) attrs->set(k, v);
        }
        for (const auto& [k, v] : args.named) attrs->set(Value::string(k), v);
        namespaces_.push_back(attrs);
        return Value::make_namespace(std::move(attrs));
    }

    // ---- expressions ----

    Value eval(const Expr& e, Scope* scope) {
        DepthGuard depth(*this);
        budget_.charge(1);
        try {
            Value v = eval_node(e, scope);
            if (v.is_string()) budget_.charge(v.str().size() / 64);  // copying big strings around is work too
            return v;
        } catch (TemplateError& err) {
            if (err.line == 0) err.line = e.line;
            throw;
        }
    }

    CallArgs eval_args(const Expr& e, Scope* scope) {
        CallArgs args;
        for (const auto& a : e.args) args.positional.push_back(eval(*a, scope));
        for (const auto& [k, v] : e.kwargs) args.named.emplace_back(k, eval(*v, scope));
        return args;
    }

    static Value call_value(const Value& callee, CallArgs& args) {
        if (callee.is_undefined()) throw_undefined(callee);
        if (callee.kind() != Kind::Function)
            throw TemplateError(std::string("'") + type_name(callee) + "' object is not callable");
        return callee.function().call(args);
    }

    // A filter chain; `block_input` is what the innermost filter of a
    // {% filter %} or {% set %} block filters (its object is null).
    Value eval_filter(const Expr& e, Scope* scope, const Value* block_input) {
        Value input;
        if (!e.object) input = block_input ? *block_input : Value();
        else if (e.object->kind == ExprKind::Filter) input = eval_filter(*e.object, scope, block_input);
        else input = eval(*e.object, scope);
        CallArgs args = eval_args(e, scope);
        try {
            return apply_filter(e.name, input, args);
        } catch (TemplateError& err) {
            if (err.line == 0) err.line = e.line;
            throw;
        }
    }

    static bool compare_op(const std::string& op, const Value& left, const Value& right) {
        if (op == "==") return equal(left, right);
        if (op == "!=") return !equal(left, right);
        if (op == "in") return contains(right, left);
        if (op == "not in") return !contains(right, left);
        if (left.is_undefined()) throw_undefined(left);
        if (right.is_undefined()) throw_undefined(right);
        const int c = compare(left, right);
        if (op == "<") return c < 0;
        if (op == "<=") return c <= 0;
        if (op == ">") return c > 0;
        return c >= 0;  // ">="
    }

    Value eval_node(const Expr& e, Scope* scope) {
        switch (e.kind) {
            case ExprKind::Literal: return e.literal;
            case ExprKind::Name: {
                if (const Value* v = scope->lookup(e.name)) return *v;
                return Value::undefined("'" + e.name + "' is undefined");
            }
            case ExprKind::List:
            case ExprKind::Tuple: {
                std::vector<Value> items;
                for (const auto& a : e.args) items.push_back(eval(*a, scope));
                return e.kind == ExprKind::List ? Value::list(std::move(items)) : Value::tuple(std::move(items));
            }
            case ExprKind::Dict: {
                Dict d;
                for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
                    Value key = eval(*e.args[i], scope);
                    if (key.kind() == Kind::List || key.kind() == Kind::Dict)
                        throw TemplateError(std::string("unhashable type: '") + type_name(key) + "'");
                    d.set(std::move(key), eval(*e.args[i + 1], scope));
                }
                return Value::dict(std::move(d));
            }
            case ExprKind::GetAttr: return get_attribute(eval(*e.object, scope), e.name);
            case ExprKind::GetItem: {
                const Value object = eval(*e.object, scope);
                const Expr& index = *e.args[0];
                if (index.kind != ExprKind::Slice) return get_item(object, eval(index, scope));
                auto part = [&](size_t i) { return index.args[i] ? eval(*index.args[i], scope) : Value(); };
                return slice(object, part(0), part(1), part(2));
            }
            case ExprKind::Slice: throw TemplateError("a slice is only allowed inside []");
            case ExprKind::Call: {
                const Value callee = eval(*e.object, scope);
                CallArgs args = eval_args(e, scope);
                return call_value(callee, args);
            }
            case ExprKind::Filter: return eval_filter(e, scope, nullptr);
            case ExprKind::Test: {
                const Value subject = eval(*e.object, scope);
                CallArgs args = eval_args(e, scope);
                return Value::boolean(apply_test(e.name, subject, args) != e.negated);
            }
            case ExprKind::Not: return Value::boolean(!truthy(eval(*e.object, scope)));
            case ExprKind::Negate: return negate(eval(*e.object, scope));
            case ExprKind::Plus: {
                Value v = eval(*e.object, scope);
                if (v.is_undefined()) throw_undefined(v);
                if (!v.is_number()) throw TemplateError(std::string("bad operand type for unary +: '") + type_name(v) + "'");
                return v.kind() == Kind::Bool ? Value::integer(v.int_value()) : v;
            }
            case ExprKind::Binary: {
                const Value left = eval(*e.object, scope);
                return binary_op(e.name, left, eval(*e.args[0], scope));
            }
            case ExprKind::And: {
                Value left = eval(*e.object, scope);
                return truthy(left) ? eval(*e.args[0], scope) : left;
            }
            case ExprKind::Or: {
                Value left = eval(*e.object, scope);
                return truthy(left) ? left : eval(*e.args[0], scope);
            }
            case ExprKind::Concat: {
                std::string s;
                for (const auto& a : e.args) {
                    s += to_str(eval(*a, scope));
                    check_size(s.size());
                }
                return Value::string(std::move(s));
            }
            case ExprKind::Compare: {
                Value left = eval(*e.object, scope);
                for (size_t i = 0; i < e.ops.size(); ++i) {
                    Value right = eval(*e.args[i], scope);
                    if (!compare_op(e.ops[i], left, right)) return Value::boolean(false);
                    left = std::move(right);
                }
                return Value::boolean(true);
            }
            case ExprKind::Conditional:
                if (truthy(eval(*e.args[0], scope))) return eval(*e.object, scope);
                return e.args[1] ? eval(*e.args[1], scope) : Value::undefined("the condition was false and there is no else");
        }
        return Value();
    }

    Budget budget_;  // first: it must outlive everything that charges it
    RenderLimits limits_;
    std::vector<std::unique_ptr<Scope>> scopes_;
    std::vector<std::weak_ptr<Dict>> namespaces_;
    int depth_ = 0;
    int macro_depth_ = 0;
};

}  // namespace

std::string render(const Program& program, const std::vector<std::pair<std::string, Value>>& variables,
                   const RenderLimits& limits) {
    Interpreter interpreter(limits);
    return interpreter.render(program, variables);
}

}  // namespace minfer::jinja
