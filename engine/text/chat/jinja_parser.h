// Tokens → the template's syntax tree, following jinja2's grammar (operator
// precedence included: `a + b is defined` tests b, `-x|abs` is (-x)|abs).
// Every construct that cannot run is refused here, at load time, with its
// line: an unknown tag, filter or test, a `break` outside a loop, nesting
// too deep to evaluate safely.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/text/chat/jinja_value.h"

namespace minfer::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind {
    Literal,      // literal
    Name,         // name
    List,         // args: items
    Tuple,        // args: items
    Dict,         // args: key, value, key, value, ...
    GetAttr,      // object.name
    GetItem,      // object[args[0]]
    Slice,        // args: start, stop, step (each may be null); only as GetItem's index
    Call,         // object(args..., kwargs...)
    Filter,       // object|name(args..., kwargs...); object is null in {% filter %} and {% set x | f %}
    Test,         // object is [not] name(args...)
    Not,          // not object
    Negate,       // -object
    Plus,         // +object
    Binary,       // object <name> args[0], name one of + - * / // % **
    And,          // object and args[0]
    Or,           // object or args[0]
    Concat,       // args[0] ~ args[1] ~ ...
    Compare,      // object ops[0] args[0] ops[1] args[1] ... (chained, as in Python)
    Conditional,  // object if args[0] else args[1] (args[1] may be null)
};

struct Expr {
    ExprKind kind;
    int line = 0;
    int depth = 1;  // height of this subtree: evaluation recursion is bounded by it
    Value literal;
    std::string name;
    ExprPtr object;
    std::vector<ExprPtr> args;
    std::vector<std::pair<std::string, ExprPtr>> kwargs;
    std::vector<std::string> ops;
    bool negated = false;  // Test: `is not`
};

struct Node;
using NodeList = std::vector<std::unique_ptr<Node>>;

enum class NodeKind {
    Text,         // text
    Output,       // {{ expr }}
    If,           // branches (condition, body)..., else_body
    For,          // for targets in expr [if condition]: body, else else_body
    Set,          // set targets = expr, or set targets[0].attribute = expr (namespace)
    SetBlock,     // set targets[0] [| filter] %}body{% endset
    Macro,        // macro name(params): body
    CallBlock,    // call(params) expr: body (the body is the callee's `caller()`)
    FilterBlock,  // filter filter: body
    With,         // with params (name = value...): body
    Break,
    Continue,
};

struct Node {
    NodeKind kind;
    int line = 0;
    std::string text;
    ExprPtr expr;
    ExprPtr condition;
    ExprPtr filter;  // a Filter chain whose innermost object is null
    std::vector<std::pair<ExprPtr, NodeList>> branches;
    NodeList body;
    NodeList else_body;
    std::vector<std::string> targets;
    std::string attribute;  // Set on a namespace: {% set ns.attribute = ... %}
    std::string name;       // Macro
    std::vector<std::pair<std::string, ExprPtr>> params;  // Macro, CallBlock (defaults may be null), With
};

struct Program {
    NodeList body;
};

// Parses a whole template. Throws TemplateError with the line of the problem.
std::shared_ptr<const Program> parse_template(std::string_view source);

}  // namespace minfer::jinja
