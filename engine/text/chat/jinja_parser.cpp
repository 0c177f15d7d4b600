// The Jinja parser: one recursive-descent Parser over the lexer's tokens,
// statements first, then expressions by precedence (or, and, not, comparisons,
// filters and tests, arithmetic, unary, postfix, primaries).
// Over 600 lines on purpose: the grammar is one class whose methods call each
// other in precedence order; split across files it would read worse.
#include "engine/text/chat/jinja_parser.h"

#include <algorithm>
#include <initializer_list>

#include "engine/text/chat/jinja_builtins.h"
#include "engine/text/chat/jinja_lexer.h"

namespace minfer::jinja {

namespace {

// Deeper templates are refused at load time: the interpreter recurses along
// the tree, and a fuzzer (or a hostile file) must not overflow the stack.
constexpr int kMaxExprDepth = 200;
constexpr int kMaxParseRecursion = 200;
constexpr size_t kMaxBlockNesting = 100;

class Parser {
public:
    explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

    NodeList parse_all() { return parse_body({}); }

private:
    // ---- token helpers ----
    const Token& cur() const { return toks_[i_]; }
    const Token& peek() const { return toks_[std::min(i_ + 1, toks_.size() - 1)]; }
    void advance() {
        if (i_ + 1 < toks_.size()) ++i_;
    }
    bool is_op(std::string_view op) const { return cur().type == TokenType::Operator && cur().text == op; }
    bool is_name(std::string_view n) const { return cur().type == TokenType::Name && cur().text == n; }
    bool skip_op(std::string_view op) {
        if (!is_op(op)) return false;
        advance();
        return true;
    }
    bool skip_name(std::string_view n) {
        if (!is_name(n)) return false;
        advance();
        return true;
    }

    static std::string describe(const Token& t) {
        switch (t.type) {
            case TokenType::Data: return "template text";
            case TokenType::VariableBegin: return "'{{'";
            case TokenType::VariableEnd: return "end of print statement '}}'";
            case TokenType::BlockBegin: return "'{%'";
            case TokenType::BlockEnd: return "end of statement block '%}'";
            case TokenType::String: return "string";
            case TokenType::Integer:
            case TokenType::Float: return "number " + t.text;
            case TokenType::End: return "end of template";
            default: return "'" + t.text + "'";
        }
    }

    [[noreturn]] void fail(const std::string& msg) const { throw TemplateError(msg, cur().line); }
    [[noreturn]] void fail_at(const std::string& msg, int line) const { throw TemplateError(msg, line); }

    void expect_op(std::string_view op) {
        if (!skip_op(op)) fail("expected '" + std::string(op) + "', got " + describe(cur()));
    }
    std::string expect_name() {
        if (cur().type != TokenType::Name) fail("expected a name, got " + describe(cur()));
        std::string n = cur().text;
        advance();
        return n;
    }
    void expect_block_end() {
        if (cur().type != TokenType::BlockEnd) fail("expected end of statement block '%}', got " + describe(cur()));
        advance();
    }
    void expect_end_tag(std::string_view tag) {
        if (!skip_name(tag)) fail("expected '" + std::string(tag) + "', got " + describe(cur()));
    }

    // Bounds the parser's own recursion ((((...)))), not not not ..., - - - x).
    struct RecursionGuard {
        explicit RecursionGuard(Parser& p) : p(p) {
            if (++p.recursion_ > kMaxParseRecursion) p.fail("expression nested too deeply");
        }
        ~RecursionGuard() { --p.recursion_; }
        Parser& p;
    };

    ExprPtr make(ExprKind kind, int line) {
        auto e = std::make_unique<Expr>();
        e->kind = kind;
        e->line = line;
        return e;
    }

    // Sets the height of a freshly built node from its children.
    ExprPtr finish(ExprPtr e) {
        int d = 0;
        auto see = [&](const ExprPtr& c) {
            if (c) d = std::max(d, c->depth);
        };
        see(e->object);
        for (const auto& a : e->args) see(a);
        for (const auto& [k, v] : e->kwargs) see(v);
        e->depth = d + 1;
        if (e->depth > kMaxExprDepth) fail_at("expression nested too deeply", e->line);
        return e;
    }

    // ---- statements ----

    // Statements up to (not including) one of `end_tags`; on return the
    // current token is that tag's name, right after its '{%'.
    NodeList parse_body(std::initializer_list<std::string_view> end_tags) {
        NodeList body;
        while (true) {
            const Token& t = cur();
            switch (t.type) {
                case TokenType::Data: {
                    auto n = std::make_unique<Node>();
                    n->kind = NodeKind::Text;
                    n->line = t.line;
                    n->text = t.text;
                    body.push_back(std::move(n));
                    advance();
                    break;
                }
                case TokenType::VariableBegin: {
                    advance();
                    auto n = std::make_unique<Node>();
                    n->kind = NodeKind::Output;
                    n->line = t.line;
                    n->expr = parse_tuple(true, {}, false);
                    if (cur().type != TokenType::VariableEnd)
                        fail("expected end of print statement '}}', got " + describe(cur()));
                    advance();
                    body.push_back(std::move(n));
                    break;
                }
                case TokenType::BlockBegin: {
                    advance();
                    if (cur().type == TokenType::Name &&
                        std::find(end_tags.begin(), end_tags.end(), cur().text) != end_tags.end())
                        return body;
                    body.push_back(parse_statement());
                    expect_block_end();
                    break;
                }
                case TokenType::End:
                    if (end_tags.size()) {
                        std::string wanted;
                        for (std::string_view tag : end_tags) wanted += (wanted.empty() ? "'" : " or '") + std::string(tag) + "'";
                        fail("unexpected end of template: expected " + wanted + " to close the '" +
                             open_blocks_.back().first + "' from line " + std::to_string(open_blocks_.back().second));
                    }
                    return body;
                default: fail("unexpected " + describe(t));
            }
        }
    }

    // The body of a block statement, after its header: statements up to `end_tags`.
    NodeList parse_block_body(std::string_view tag, int line, std::initializer_list<std::string_view> end_tags) {
        expect_block_end();
        open_blocks_.emplace_back(std::string(tag), line);
        if (open_blocks_.size() > kMaxBlockNesting) fail("blocks nested too deeply");
        NodeList body = parse_body(end_tags);
        open_blocks_.pop_back();
        return body;
    }

    std::unique_ptr<Node> new_node(NodeKind kind, int line) {
        auto n = std::make_unique<Node>();
        n->kind = kind;
        n->line = line;
        return n;
    }

    std::unique_ptr<Node> parse_statement() {
        if (cur().type != TokenType::Name) fail("tag name expected, got " + describe(cur()));
        const std::string tag = cur().text;
        const int line = cur().line;
        if (tag == "for") return parse_for();
        if (tag == "if") return parse_if();
        if (tag == "set") return parse_set();
        if (tag == "macro") return parse_macro();
        if (tag == "call") return parse_call_block();
        if (tag == "filter") return parse_filter_block();
        if (tag == "with") return parse_with();
        if (tag == "break" || tag == "continue") {
            if (loop_depth_ == 0) fail("'" + tag + "' outside of a for loop");
            advance();
            return new_node(tag == "break" ? NodeKind::Break : NodeKind::Continue, line);
        }
        if (tag == "print") {
            advance();
            auto n = new_node(NodeKind::Output, line);
            n->expr = parse_tuple(true, {}, false);
            return n;
        }
        static constexpr std::string_view kUnsupported[] = {"block", "extends", "include", "import", "from",
                                                            "autoescape", "trans", "do", "generation"};
        if (std::find(std::begin(kUnsupported), std::end(kUnsupported), tag) != std::end(kUnsupported))
            fail("unsupported tag '" + tag + "' (chat templates render on their own: no inheritance, includes or imports)");
        std::string msg = "unknown tag '" + tag + "'";
        if (!open_blocks_.empty())
            msg += " (the innermost open block is '" + open_blocks_.back().first + "' from line " +
                   std::to_string(open_blocks_.back().second) + ")";
        fail(msg);
    }

    // for x in xs / for k, v in d.items() / for (a, b) in pairs
    std::vector<std::string> parse_target_names(std::string_view stop_name, std::string_view stop_op) {
        std::vector<std::string> names;
        if (skip_op("(")) {
            do {
                if (is_op(")")) break;
                names.push_back(expect_name());
            } while (skip_op(","));
            expect_op(")");
            return names;
        }
        names.push_back(expect_name());
        while (skip_op(",")) {
            if ((!stop_name.empty() && is_name(stop_name)) || (!stop_op.empty() && is_op(stop_op))) break;
            names.push_back(expect_name());
        }
        return names;
    }

    std::unique_ptr<Node> parse_for() {
        auto n = new_node(NodeKind::For, cur().line);
        advance();
        n->targets = parse_target_names("in", "");
        expect_end_tag("in");
        n->expr = parse_tuple(false, {"recursive"}, false);
        if (skip_name("if")) n->condition = parse_expression(true);
        if (is_name("recursive")) fail("recursive for loops are not supported");
        ++loop_depth_;
        n->body = parse_block_body("for", n->line, {"endfor", "else"});
        --loop_depth_;
        if (skip_name("else")) n->else_body = parse_block_body("for", n->line, {"endfor"});
        expect_end_tag("endfor");
        return n;
    }

    std::unique_ptr<Node> parse_if() {
        auto n = new_node(NodeKind::If, cur().line);
        advance();
        while (true) {
            ExprPtr cond = parse_tuple(false, {}, false);
            NodeList body = parse_block_body("if", n->line, {"elif", "else", "endif"});
            n->branches.emplace_back(std::move(cond), std::move(body));
            if (skip_name("elif")) continue;
            if (skip_name("else")) n->else_body = parse_block_body("if", n->line, {"endif"});
            expect_end_tag("endif");
            return n;
        }
    }

    std::unique_ptr<Node> parse_set() {
        const int line = cur().line;
        advance();
        std::vector<std::string> targets;
        std::string attribute;
        if (cur().type == TokenType::Name && peek().type == TokenType::Operator && peek().text == ".") {
            targets.push_back(expect_name());
            advance();  // '.'
            attribute = expect_name();
        } else {
            targets = parse_target_names("", "=");
        }
        if (skip_op("=")) {
            auto n = new_node(NodeKind::Set, line);
            n->targets = std::move(targets);
            n->attribute = std::move(attribute);
            n->expr = parse_tuple(true, {}, false);
            return n;
        }
        auto n = new_node(NodeKind::SetBlock, line);
        if (targets.size() != 1) fail("a block set takes one name");
        n->targets = std::move(targets);
        n->attribute = std::move(attribute);
        if (is_op("|")) n->filter = parse_filters(nullptr, false);
        n->body = parse_block_body("set", line, {"endset"});
        expect_end_tag("endset");
        return n;
    }

    std::vector<std::pair<std::string, ExprPtr>> parse_signature() {
        std::vector<std::pair<std::string, ExprPtr>> params;
        expect_op("(");
        bool defaults = false;
        while (!is_op(")")) {
            if (!params.empty()) expect_op(",");
            if (is_op(")")) break;
            std::string name = expect_name();
            ExprPtr def;
            if (skip_op("=")) {
                def = parse_expression(true);
                defaults = true;
            } else if (defaults) {
                fail("non-default argument follows default argument");
            }
            params.emplace_back(std::move(name), std::move(def));
        }
        expect_op(")");
        return params;
    }

    // The body of a macro or a call block, through its end tag. It runs when
    // called, not inside the loop around its definition, so break and continue
    // in it do not reach that loop.
    NodeList parse_callable_body(std::string_view tag, int line, std::string_view end_tag) {
        const int saved_loops = loop_depth_;
        loop_depth_ = 0;
        NodeList body = parse_block_body(tag, line, {end_tag});
        loop_depth_ = saved_loops;
        expect_end_tag(end_tag);
        return body;
    }

    std::unique_ptr<Node> parse_macro() {
        auto n = new_node(NodeKind::Macro, cur().line);
        advance();
        n->name = expect_name();
        n->params = parse_signature();
        n->body = parse_callable_body("macro", n->line, "endmacro");
        return n;
    }

    std::unique_ptr<Node> parse_call_block() {
        auto n = new_node(NodeKind::CallBlock, cur().line);
        advance();
        if (is_op("(")) n->params = parse_signature();
        n->expr = parse_expression(true);
        if (n->expr->kind != ExprKind::Call) fail_at("{% call %} needs a macro call", n->line);
        n->body = parse_callable_body("call", n->line, "endcall");
        return n;
    }

    std::unique_ptr<Node> parse_filter_block() {
        auto n = new_node(NodeKind::FilterBlock, cur().line);
        advance();
        n->filter = parse_filters(nullptr, true);
        n->body = parse_block_body("filter", n->line, {"endfilter"});
        expect_end_tag("endfilter");
        return n;
    }

    std::unique_ptr<Node> parse_with() {
        auto n = new_node(NodeKind::With, cur().line);
        advance();
        while (cur().type != TokenType::BlockEnd) {
            if (!n->params.empty()) expect_op(",");
            std::string name = expect_name();
            expect_op("=");
            n->params.emplace_back(std::move(name), parse_expression(true));
        }
        n->body = parse_block_body("with", n->line, {"endwith"});
        expect_end_tag("endwith");
        return n;
    }

    // ---- expressions (jinja2's precedence, loosest first) ----

    bool is_tuple_end(std::initializer_list<std::string_view> extra_end) const {
        if (cur().type == TokenType::VariableEnd || cur().type == TokenType::BlockEnd || is_op(")")) return true;
        return cur().type == TokenType::Name &&
               std::find(extra_end.begin(), extra_end.end(), cur().text) != extra_end.end();
    }

    // a, b, c → a tuple; a alone → a.
    ExprPtr parse_tuple(bool with_condexpr, std::initializer_list<std::string_view> extra_end, bool explicit_parens) {
        const int line = cur().line;
        std::vector<ExprPtr> items;
        bool is_tuple = false;
        while (true) {
            if (!items.empty()) expect_op(",");
            if (is_tuple_end(extra_end)) break;
            items.push_back(parse_expression(with_condexpr));
            if (is_op(",")) is_tuple = true;
            else break;
        }
        if (!is_tuple) {
            if (!items.empty()) return std::move(items[0]);
            if (!explicit_parens) fail("expected an expression, got " + describe(cur()));
        }
        auto e = make(ExprKind::Tuple, line);
        e->args = std::move(items);
        return finish(std::move(e));
    }

    ExprPtr parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

    ExprPtr parse_condexpr() {
        RecursionGuard guard(*this);
        ExprPtr e = parse_or();
        while (is_name("if")) {
            const int line = cur().line;
            advance();
            auto c = make(ExprKind::Conditional, line);
            c->object = std::move(e);
            c->args.push_back(parse_or());
            c->args.push_back(skip_name("else") ? parse_condexpr() : nullptr);
            e = finish(std::move(c));
        }
        return e;
    }

    // `a or b or c`, `a and b and c`: left-associative, each operand parsed by `next`.
    ExprPtr parse_logical(std::string_view keyword, ExprKind kind, ExprPtr (Parser::*next)()) {
        ExprPtr e = (this->*next)();
        while (is_name(keyword)) {
            auto b = make(kind, cur().line);
            advance();
            b->object = std::move(e);
            b->args.push_back((this->*next)());
            e = finish(std::move(b));
        }
        return e;
    }

    ExprPtr parse_or() { return parse_logical("or", ExprKind::Or, &Parser::parse_and); }
    ExprPtr parse_and() { return parse_logical("and", ExprKind::And, &Parser::parse_not); }

    ExprPtr parse_not() {
        if (is_name("not")) {
            RecursionGuard guard(*this);
            auto n = make(ExprKind::Not, cur().line);
            advance();
            n->object = parse_not();
            return finish(std::move(n));
        }
        return parse_compare();
    }

    ExprPtr parse_compare() {
        const int line = cur().line;
        ExprPtr e = parse_math1();
        ExprPtr cmp;
        while (true) {
            std::string op;
            if (cur().type == TokenType::Operator &&
                (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
                 cur().text == ">" || cur().text == ">=")) {
                op = cur().text;
                advance();
            } else if (is_name("in")) {
                op = "in";
                advance();
            } else if (is_name("not") && peek().type == TokenType::Name && peek().text == "in") {
                op = "not in";
                advance();
                advance();
            } else {
                break;
            }
            if (!cmp) {
                cmp = make(ExprKind::Compare, line);
                cmp->object = std::move(e);
            }
            cmp->ops.push_back(op);
            cmp->args.push_back(parse_math1());
        }
        return cmp ? finish(std::move(cmp)) : std::move(e);
    }

    ExprPtr binary(ExprPtr left, std::string op, ExprPtr right, int line) {
        auto b = make(ExprKind::Binary, line);
        b->name = std::move(op);
        b->object = std::move(left);
        b->args.push_back(std::move(right));
        return finish(std::move(b));
    }

    // One precedence level of left-associative binary operators (`a + b - c`),
    // each operand parsed by `next`.
    template <typename Next>
    ExprPtr parse_binary_level(std::initializer_list<std::string_view> ops, Next next) {
        ExprPtr e = next();
        while (std::ranges::any_of(ops, [&](std::string_view op) { return is_op(op); })) {
            const std::string op = cur().text;
            const int line = cur().line;
            advance();
            e = binary(std::move(e), op, next(), line);
        }
        return e;
    }

    ExprPtr parse_math1() {
        return parse_binary_level({"+", "-"}, [this] { return parse_concat(); });
    }

    ExprPtr parse_concat() {
        const int line = cur().line;
        ExprPtr first = parse_math2();
        if (!is_op("~")) return first;
        auto c = make(ExprKind::Concat, line);
        c->args.push_back(std::move(first));
        while (skip_op("~")) c->args.push_back(parse_math2());
        return finish(std::move(c));
    }

    ExprPtr parse_math2() {
        return parse_binary_level({"*", "/", "//", "%"}, [this] { return parse_pow(); });
    }

    ExprPtr parse_pow() {
        return parse_binary_level({"**"}, [this] { return parse_unary(true); });
    }

    ExprPtr parse_unary(bool with_filter) {
        RecursionGuard guard(*this);
        ExprPtr e;
        if (is_op("-") || is_op("+")) {
            auto u = make(is_op("-") ? ExprKind::Negate : ExprKind::Plus, cur().line);
            advance();
            u->object = parse_unary(false);
            e = finish(std::move(u));
        } else {
            e = parse_primary();
        }
        e = parse_postfix(std::move(e));
        if (with_filter) e = parse_filter_expr(std::move(e));
        return e;
    }

    ExprPtr parse_primary() {
        RecursionGuard guard(*this);
        const Token& t = cur();
        switch (t.type) {
            case TokenType::Name: {
                auto e = make(ExprKind::Literal, t.line);
                if (t.text == "true" || t.text == "True") e->literal = Value::boolean(true);
                else if (t.text == "false" || t.text == "False") e->literal = Value::boolean(false);
                else if (t.text == "none" || t.text == "None") e->literal = Value::none();
                else {
                    e->kind = ExprKind::Name;
                    e->name = t.text;
                }
                advance();
                return e;
            }
            case TokenType::String: {
                auto e = make(ExprKind::Literal, t.line);
                std::string s;
                while (cur().type == TokenType::String) {  // 'a' 'b' is 'ab', as in Python
                    s += cur().text;
                    advance();
                }
                e->literal = Value::string(std::move(s));
                return e;
            }
            case TokenType::Integer:
            case TokenType::Float: {
                auto e = make(ExprKind::Literal, t.line);
                e->literal = t.type == TokenType::Integer ? Value::integer(t.integer) : Value::number(t.number);
                advance();
                return e;
            }
            case TokenType::Operator:
                if (t.text == "(") {
                    advance();
                    ExprPtr e = parse_tuple(true, {}, true);
                    expect_op(")");
                    return e;
                }
                if (t.text == "[") return parse_list();
                if (t.text == "{") return parse_dict();
                break;
            default: break;
        }
        fail("unexpected " + describe(t));
    }

    // A list or dict display after its opening bracket: items separated by
    // commas, a trailing comma allowed, through the closing `close`.
    template <typename ParseItem>
    void parse_display_items(std::string_view close, ParseItem parse_item) {
        bool first = true;
        while (!is_op(close)) {
            if (!std::exchange(first, false)) expect_op(",");
            if (is_op(close)) break;
            parse_item();
        }
        expect_op(close);
    }

    ExprPtr parse_list() {
        auto e = make(ExprKind::List, cur().line);
        advance();
        parse_display_items("]", [&] { e->args.push_back(parse_expression(true)); });
        return finish(std::move(e));
    }

    ExprPtr parse_dict() {
        auto e = make(ExprKind::Dict, cur().line);
        advance();
        parse_display_items("}", [&] {
            e->args.push_back(parse_expression(true));
            expect_op(":");
            e->args.push_back(parse_expression(true));
        });
        return finish(std::move(e));
    }

    ExprPtr parse_postfix(ExprPtr e) {
        while (true) {
            if (is_op(".") || is_op("[")) e = parse_subscript(std::move(e));
            else if (is_op("(")) e = parse_call(std::move(e));
            else return e;
        }
    }

    ExprPtr parse_filter_expr(ExprPtr e) {
        while (true) {
            if (is_op("|")) e = parse_filters(std::move(e), false);
            else if (is_name("is")) e = parse_test(std::move(e));
            else if (is_op("(")) e = parse_call(std::move(e));
            else return e;
        }
    }

    ExprPtr parse_subscript(ExprPtr object) {
        const int line = cur().line;
        if (skip_op(".")) {
            if (cur().type == TokenType::Name) {
                auto e = make(ExprKind::GetAttr, line);
                e->object = std::move(object);
                e->name = expect_name();
                return finish(std::move(e));
            }
            if (cur().type != TokenType::Integer) fail("expected a name or number after '.'");
            auto index = make(ExprKind::Literal, cur().line);
            index->literal = Value::integer(cur().integer);
            advance();
            auto e = make(ExprKind::GetItem, line);
            e->object = std::move(object);
            e->args.push_back(std::move(index));
            return finish(std::move(e));
        }
        expect_op("[");
        std::vector<ExprPtr> parts;
        while (!is_op("]")) {
            if (!parts.empty()) expect_op(",");
            parts.push_back(parse_subscribed());
        }
        expect_op("]");
        if (parts.empty()) fail_at("expected an index inside '[]'", line);
        auto e = make(ExprKind::GetItem, line);
        e->object = std::move(object);
        if (parts.size() == 1) {
            e->args.push_back(std::move(parts[0]));
        } else {
            auto t = make(ExprKind::Tuple, line);
            t->args = std::move(parts);
            e->args.push_back(finish(std::move(t)));
        }
        return finish(std::move(e));
    }

    ExprPtr parse_subscribed() {
        const int line = cur().line;
        ExprPtr start;
        if (!skip_op(":")) {
            ExprPtr e = parse_expression(true);
            if (!skip_op(":")) return e;
            start = std::move(e);
        }
        auto s = make(ExprKind::Slice, line);
        s->args.push_back(std::move(start));
        s->args.push_back(is_op("]") || is_op(",") || is_op(":") ? nullptr : parse_expression(true));
        ExprPtr step;
        if (skip_op(":") && !is_op("]") && !is_op(",")) step = parse_expression(true);
        s->args.push_back(std::move(step));
        return finish(std::move(s));
    }

    void parse_call_args(Expr& e) {
        expect_op("(");
        while (!is_op(")")) {
            if (!e.args.empty() || !e.kwargs.empty()) {
                expect_op(",");
                if (is_op(")")) break;
            }
            if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
            if (cur().type == TokenType::Name && peek().type == TokenType::Operator && peek().text == "=") {
                std::string key = expect_name();
                advance();  // '='
                e.kwargs.emplace_back(std::move(key), parse_expression(true));
            } else {
                if (!e.kwargs.empty()) fail("positional argument follows keyword argument");
                e.args.push_back(parse_expression(true));
            }
        }
        expect_op(")");
    }

    ExprPtr parse_call(ExprPtr callee) {
        auto e = make(ExprKind::Call, cur().line);
        e->object = std::move(callee);
        parse_call_args(*e);
        return finish(std::move(e));
    }

    // x|f|g(1): object is null for the filter of a {% filter %} or {% set %} block.
    ExprPtr parse_filters(ExprPtr object, bool start_inline) {
        while (is_op("|") || start_inline) {
            if (!start_inline) advance();
            start_inline = false;
            const int line = cur().line;
            std::string name = expect_name();
            while (skip_op(".")) {
                name += '.';
                name += expect_name();
            }
            if (!is_filter(name)) fail_at("unknown filter '" + name + "'", line);
            auto f = make(ExprKind::Filter, line);
            f->name = std::move(name);
            f->object = std::move(object);
            if (is_op("(")) parse_call_args(*f);
            object = finish(std::move(f));
        }
        return object;
    }

    ExprPtr parse_test(ExprPtr subject) {
        auto t = make(ExprKind::Test, cur().line);
        advance();  // 'is'
        t->negated = skip_name("not");
        const int line = cur().line;
        t->name = expect_name();
        while (skip_op(".")) {
            t->name += '.';
            t->name += expect_name();
        }
        if (!is_test(t->name)) fail_at("unknown test '" + t->name + "'", line);
        t->object = std::move(subject);
        if (is_op("(")) {
            parse_call_args(*t);
        } else if ((cur().type == TokenType::Name || cur().type == TokenType::String || cur().type == TokenType::Integer ||
                    cur().type == TokenType::Float || is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
            if (is_name("is")) fail("tests cannot be chained with 'is'");
            t->args.push_back(parse_postfix(parse_primary()));  // `x is divisibleby 3`
        }
        return finish(std::move(t));
    }

    std::vector<Token> toks_;
    size_t i_ = 0;
    int recursion_ = 0;
    int loop_depth_ = 0;
    std::vector<std::pair<std::string, int>> open_blocks_;  // tag and line of each block being parsed
};

}  // namespace

std::shared_ptr<const Program> parse_template(std::string_view source) {
    auto program = std::make_shared<Program>();
    program->body = Parser(tokenize(source)).parse_all();
    return program;
}

}  // namespace minfer::jinja
