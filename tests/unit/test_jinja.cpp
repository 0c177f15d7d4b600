// The Jinja interpreter behind chat templates (engine/text/chat/). Expected strings
// are what Python's jinja2 renders, set up as Hugging Face sets it up
// (trim_blocks, lstrip_blocks, loopcontrols); tests/integration/
// test_chat_templates.py checks real templates against jinja2 itself.
#include <doctest/doctest.h>

#include <boost/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "engine/text/chat/chat_template.h"
#include "engine/text/chat/jinja_interpreter.h"
#include "engine/text/chat/jinja_parser.h"

using namespace minfer;
using jinja::Value;

namespace {

Value from_json(const boost::json::value& v) {
    switch (v.kind()) {
        case boost::json::kind::null: return Value::none();
        case boost::json::kind::bool_: return Value::boolean(v.get_bool());
        case boost::json::kind::int64: return Value::integer(v.get_int64());
        case boost::json::kind::uint64: return Value::integer(static_cast<int64_t>(v.get_uint64()));
        case boost::json::kind::double_: return Value::number(v.get_double());
        case boost::json::kind::string: return Value::string(std::string(v.get_string()));
        case boost::json::kind::array: {
            std::vector<Value> items;
            for (const auto& x : v.get_array()) items.push_back(from_json(x));
            return Value::list(std::move(items));
        }
        case boost::json::kind::object: {
            jinja::Dict d;
            for (const auto& [k, x] : v.get_object()) d.set(Value::string(std::string(k)), from_json(x));
            return Value::dict(std::move(d));
        }
    }
    return Value();
}

// Renders `source` with the variables of the JSON object `vars`.
std::string render(const std::string& source, const std::string& vars = "{}", const jinja::RenderLimits& limits = {}) {
    std::vector<std::pair<std::string, Value>> variables;
    const boost::json::value parsed = boost::json::parse(vars);
    for (const auto& [k, v] : parsed.as_object()) variables.emplace_back(std::string(k), from_json(v));
    return jinja::render(*jinja::parse_template(source), variables, limits);
}

// The message of the error that loading or rendering `source` throws.
std::string error_of(const std::string& source, const std::string& vars = "{}", const jinja::RenderLimits& limits = {}) {
    try {
        render(source, vars, limits);
    } catch (const jinja::TemplateError& e) {
        return "line " + std::to_string(e.line) + ": " + e.what();
    }
    return "(no error)";
}

// A template, what it must render (or, for check_errors, the error it must
// raise), and the JSON object of its variables.
struct Case {
    std::string source;
    std::string want;
    std::string vars = "{}";
};

void check_renders(const std::vector<Case>& cases) {
    for (const Case& c : cases) {
        INFO("template: ", c.source);
        CHECK(render(c.source, c.vars) == c.want);
    }
}

void check_errors(const std::vector<Case>& cases) {
    for (const Case& c : cases) {
        INFO("template: ", c.source);
        CHECK(error_of(c.source, c.vars) == c.want);
    }
}

const char* kVars = R"({"x": {"a": 1, "content": "hi"}, "s": "héllo wörld", "n": null, "xs": [3, 1, 2]})";

}  // namespace

TEST_CASE("jinja: literals and Python's str()") {
    check_renders({
        {"{{ 1 }} {{ 1.0 }} {{ 10/4 }} {{ 10/2 }} {{ -7//2 }} {{ -7 % 3 }} {{ 7.5 // 2 }} {{ 2**10 }}",
         "1 1.0 2.5 5.0 -4 2 3.0 1024"},
        {"{{ 1e20 }}|{{ 1e16 }}|{{ 1e15 }}|{{ 1.5e-5 }}|{{ 0.0001 }}|{{ 0.1 + 0.2 }}",
         "1e+20|1e+16|1000000000000000.0|1.5e-05|0.0001|0.30000000000000004"},
        {"{{ none }} {{ true }} {{ False }} [{{ nothing }}]", "None True False []"},
        {"{{ (1,) }}{{ [1, 'a', none, true] }}{{ {'a': 1, \"b\": [2.5]} }}{{ ('x', \"it's\") }}",
         "(1,)[1, 'a', None, True]{'a': 1, 'b': [2.5]}('x', \"it's\")"},
        {"{{ 'a' 'b' }}{{ 'ab' * 3 }}{{ 2 * 'x' }}{{ 'a' ~ 1 ~ none ~ nothing }}", "abababab" "xx" "a1None"},
        {R"({{ 'tab\there\n' }}{{ "\u00e9\x41" }})", "tab\there\néA"},
    });
}

TEST_CASE("jinja: operators and precedence") {
    check_renders({
        {"{{ 1 + 2 * 3 }} {{ -2 ** 2 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }}", "7 4 9 64"},
        {"{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ true == 1 }} {{ [1, 2] == [1, 2] }}",
         "True False True True True"},
        {"{{ 'a' in 'cat' }} {{ 2 not in [1, 3] }} {{ 'k' in {'k': 1} }} {{ not true or true }}",
         "True True True True"},
        {"[{{ 'x' if false }}] {{ 'yes' if 1 else 'no' }} {{ none or 'dflt' }} {{ 0 and 1 }}", "[] yes dflt 0"},
        {"{{ [1, 2] + [3] }} {{ 'a' + 'b' }} {{ 1 + 2.5 }} {{ true + 1 }}", "[1, 2, 3] ab 3.5 2"},
        // `is` and filters bind tighter than arithmetic; not applies to the whole test.
        {"{{ 1 + 1 is odd }} {{ not n is none }} {{ -3|abs }}", "2 False 3", kVars},
    });
}

TEST_CASE("jinja: attribute and item access as in Python") {
    check_renders({
        {"{{ x.content }}{{ x['a'] }}[{{ x.missing }}]{{ x.missing is defined }}", "hi1[]False", kVars},
        {"{{ xs[0] }}{{ xs[-1] }}[{{ xs[5] }}]{{ xs[1:] }}{{ xs[::-1] }}{{ xs[:-1] }}",
         "32[][1, 2][2, 1, 3][3, 1]",
         kVars},
        {"{{ 'ab'[::-1] }}{{ s[1:4] }}{{ s[-1] }}{{ s|length }}", "baélld11", kVars},
        {"{{ x.get('a') }}{{ x.get('zz', 'd') }}{{ x.get('zz') }}{% for k, v in x.items() %}{{ k }}={{ v }};{% endfor %}",
         "1dNonea=1;content=hi;",
         kVars},
        {"{{ x.keys()|list }}{{ x.values()|list }}", "['a', 'content'][1, 'hi']", kVars},
    });
    // Attribute access on a missing value is an error, on None it is undefined.
    CHECK(error_of("{{ x.missing.deeper }}", kVars) == "line 1: 'dict object' has no attribute 'missing'");
    CHECK(render("[{{ n.foo }}]", kVars) == "[]");
}

TEST_CASE("jinja: whitespace control, trim_blocks and lstrip_blocks") {
    check_renders({
        {"{% if true %}\n  x\n{% endif %}\n", "  x\n"},
        {"  {% if true %}yes{% endif %}", "yes"},
        {"a {%- if true %} b {% endif -%} c", "a b c"},
        {"{# c #}\nz", "z"},
        {"  {%+ if true %}y{% endif %}", "  y"},
        {"{% if true +%}\nkeep{% endif %}", "\nkeep"},
        {"a\n  {{- ' b ' -}}  \nc", "a b c"},
        {"{% raw %}{{ x }}{% endraw %}", "{{ x }}"},
        {"<{% for i in [1, 2] %}\n    {{ i }}\n{% endfor %}>", "<    1\n    2\n>"},
        {"line\r\nnext\r\n", "line\nnext"}, // newlines normalized, one trailing newline dropped
    });
}

TEST_CASE("jinja: for loops") {
    check_renders({
        {"{% for i in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}"
         "{{ loop.revindex }}{{ loop.revindex0 }};{% endfor %}",
         "10TrueFalse332;21FalseFalse321;32FalseTrue310;",
         kVars},
        {"{% for i in xs %}{{ loop.previtem }}-{{ loop.nextitem }}|{% endfor %}", "-1|3-2|1-|", kVars},
        {"{% for i in [] %}x{% else %}empty{% endfor %}", "empty"},
        {"{% for i in xs if i > 1 %}{{ i }}{{ loop.length }}{% endfor %}", "3222", kVars},
        {"{% for a, b in [(1, 2), [3, 4]] %}{{ a + b }}{% endfor %}", "37"},
        {"{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% endif %}"
         "{{ i }}{% endfor %}",
         "013"},
        {"{% for i in range(3) %}{{ loop.cycle('a', 'b') }}{% endfor %}", "aba"},
        {"{% for c in 'hé' %}[{{ c }}]{% endfor %}{% for k in {'a': 1, 'b': 2} %}{{ k }}{% endfor %}", "[h][é]ab"},
        // A set inside a loop stays there; a namespace carries it out.
        {"{% set t = 0 %}{% set ns = namespace(t=0) %}{% for i in [1, 2] %}{% set t = t + i %}"
         "{% set ns.t = ns.t + i %}{% endfor %}{{ t }} {{ ns.t }}",
         "0 3"},
        {"{% for i in [1] %}{% for j in [2] %}{{ loop.index }}{% endfor %}{{ loop.length }}{% endfor %}", "11"},
    });
}

TEST_CASE("jinja: set, blocks, with, filter blocks") {
    check_renders({
        {"{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = 1, %}{{ t }}", "12(1,)"},
        {"{% set block %}  x {{ 1 }}  {% endset %}[{{ block }}]", "[  x 1  ]"},
        {"{% set block | trim | upper %}  x  {% endset %}[{{ block }}]", "[X]"},
        {"{% filter upper %}abc{{ 'd' }}{% endfilter %}", "ABCD"},
        {"{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]", "3[]"},
        {"{% set ns = namespace(d={'k': 'v'}) %}{% set ns.x = ns.d.k %}{{ ns.x }}", "v"},
    });
    CHECK(error_of("{% set x = 1 %}{% set x.y = 2 %}") == "line 1: cannot assign attribute 'y' on 'x': it is not a namespace()");
}

TEST_CASE("jinja: macros and call blocks") {
    check_renders({
        {"{% macro greet(name, greeting='Hi', punct='!') %}{{ greeting }} {{ name }}{{ punct }}{% endmacro %}"
         "{{ greet('Ann') }} {{ greet('Bo', punct='?') }} {{ greet(name='Cy', greeting='Yo') }}",
         "Hi Ann! Hi Bo? Yo Cy!"},
        {"{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}"
         "{{ fact(5) }}",
         "120"},
        {"{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}"
         "{% call wrap('b') %}bold{% endcall %}",
         "<b>bold</b>"},
        {"{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}"
         "{% call(v) each([1, 2]) %}<{{ v }}>{% endcall %}",
         "<1><2>"},
        {"{% macro m() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, k=3) }}", "(1, 2){'k': 3}"},
        // Macros see the template's variables at call time, not their own sets.
        {"{% macro show() %}{{ v }}{% endmacro %}{% set v = 'late' %}{{ show() }}", "late"},
        {"{% macro r() %}{% set inner = 1 %}{% endmacro %}{{ r() }}[{{ inner }}]", "[]"},
    });
}

TEST_CASE("jinja: filters") {
    check_renders({
        {R"({{ {'b': [1, 2.0, none, true], 'a': 'é"\n'}|tojson }})", R"({"b": [1, 2.0, null, true], "a": "é\"\n"})"},
        {"{{ {'a': [1, {}], 'b': []}|tojson(indent=2) }}", "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": []\n}"},
        {"{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}{{ [1, 2]|tojson(separators=(',', ':')) }}",
         "{\"a\": 2, \"b\": 1}[1,2]"},
        {"[{{ '  a b \n'|trim }}][{{ 'xxaxx'|trim('x') }}]", "[a b][a]"},
        {"{{ xs|join(', ') }} {{ xs|length }} {{ xs|count }} {{ xs|first }} {{ xs|last }} {{ xs|sum }}",
         "3, 1, 2 3 3 3 2 6",
         kVars},
        {"{{ xs|sort|list }}{{ xs|sort(reverse=true) }}{{ ['B', 'a', 'C']|sort }}{{ ['a', 'A', 'b']|unique|list }}",
         "[1, 2, 3][3, 2, 1]['a', 'B', 'C']['a', 'b']",
         kVars},
        {"{{ xs|reverse|list }}{{ 'abc'|reverse }}{{ xs|min }}{{ xs|max }}", "[2, 1, 3]cba13", kVars},
        {"[{{ nothing|default('d') }}][{{ ''|default('d') }}][{{ ''|default('d', true) }}][{{ n|d('x') }}]",
         "[d][][d][None]",
         kVars},
        {"{{ 'Hello World'|upper }} {{ 'Hello World'|lower }} {{ 'hello world-foo(bar'|title }} "
         "{{ 'hELLO wORLD'|capitalize }}",
         "HELLO WORLD hello world Hello World-Foo(Bar Hello world"},
        {"{{ 'aXbX'|replace('X', '-') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 'one two  three'|wordcount }}",
         "a-b- bba 3"},
        {"{{ 2.675|round(2) }} {{ 2.5|round }} {{ 3|round }} {{ 3.14159|round(2, 'floor') }} {{ -3|abs }}",
         "2.67 2.0 3 3.14 3"},
        {"{{ '42'|int + 1 }} {{ '4.7'|int }} {{ 'x'|int(7) }} {{ '2.5'|float }} {{ 3|float }} {{ 5|string ~ '!' }}",
         "43 4 7 2.5 3.0 5!"},
        {"{{ 'a\nb\n\nc'|indent(2) }}|{{ 'a\nb'|indent(2, true) }}|{{ 'x\n\ny'|indent(2, blank=true) }}",
         "a\n  b\n\n  c|  a\n  b|x\n  \n  y"},
    });
    const char* people = R"({"people": [{"name": "Ann", "age": 30, "tags": ["x"]}, {"name": "Bo", "age": 20},
                                        {"name": "Cy", "age": 30}]})";
    check_renders({
        {"{{ people|map(attribute='name')|join(',') }} {{ people|selectattr('age', 'equalto', 30)|map(attribute='name')|list }} "
         "{{ people|rejectattr('tags')|map(attribute='name')|list }} {{ people|sort(attribute='age')|map(attribute='name')|join }}",
         "Ann,Bo,Cy ['Ann', 'Cy'] ['Bo', 'Cy'] BoAnnCy",
         people},
        {"{{ people|map(attribute='tags', default=[])|map('length')|list }} {{ [1, 2, 3, 4]|select('odd')|list }} "
         "{{ [1, 2, 3, 4]|reject('gt', 2)|list }} {{ [0, 1, '']|select|list }}",
         "[1, 0, 0] [1, 3] [1, 2] [1]",
         people},
        {"{% for k, v in {'a': 1}|items %}{{ k }}{{ v }}{% endfor %}{{ {'b': 1, 'a': 2}|dictsort }}",
         "a1[('a', 2), ('b', 1)]"},
        {"{{ [1, 2, 3]|batch(2)|list }} {{ [1, 2, 3]|batch(2, 0)|list }}", "[[1, 2], [3]] [[1, 2], [3, 0]]"},
        {"{{ 'a'|safe + '<b>' }} {{ '<b>'|e }} {{ '<b>' ~ 'x'|safe }}", "a&lt;b&gt; &lt;b&gt; <b>x"},
        {"{{ '%s is %d'|format('x', 3) }} {{ '%05.1f' % 3.14159 }}", "x is 3 003.1"},
    });
    // map/select return generators, as in jinja2: json.dumps refuses them.
    CHECK(error_of("{{ [1]|map('string')|tojson }}") == "line 1: Object of type generator is not JSON serializable");
}

TEST_CASE("jinja: tests") {
    check_renders({
        {"{{ n is none }}{{ 1 is number }}{{ 1 is integer }}{{ 1.0 is float }}{{ true is boolean }}"
         "{{ 's' is string }}{{ x is mapping }}{{ xs is iterable }}{{ 's' is sequence }}{{ range is callable }}",
         "TrueTrueTrueTrueTrueTrueTrueTrueTrueTrue",
         kVars},
        {"{{ 1 is odd }}{{ 2 is even }}{{ 6 is divisibleby 3 }}{{ 6 is divisibleby(4) }}{{ 'a' is in 'cat' }}"
         "{{ 3 is gt 2 }}{{ 3 is lt 2 }}{{ 'a' is eq 'a' }}{{ 'a' is ne 'a' }}{{ true is true }}{{ 1 is false }}",
         "TrueTrueTrueFalseTrueTrueFalseTrueFalseTrueFalse"},
        {"{{ nothing is defined }}{{ nothing is undefined }}{{ x.a is not defined }}{{ 'abc' is lower }}",
         "FalseTrueFalseTrue",
         kVars},
    });
}

TEST_CASE("jinja: string methods") {
    check_renders({
        {"{{ s.split() }}{{ '  a b  '.split(' ') }}{{ 'a,b,,c'.split(',', 1) }}{{ ' a  b c '.rsplit(none, 1) }}",
         "['héllo', 'wörld']['', '', 'a', 'b', '', '']['a', 'b,,c'][' a  b', 'c']",
         kVars},
        {"{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}{{ ' x '.strip() }}{{ 'xxaxx'.lstrip('x') }}"
         "{{ 'a-b'.replace('-', '+') }}{{ 'aé'.upper() }}{{ 'héllo'.find('l') }}{{ 'aaa'.count('a') }}",
         "TrueTruexaxxa+bAÉ23"},
        {"{{ '{} and {name}'.format(1, name='x') }} {{ ', '.join(['a', 'b']) }} {{ 'a</think>b'.split('</think>')[-1] }}",
         "1 and x a, b b"},
    });
    CHECK(error_of("{{ 'abc'.nosuchmethod() }}") == "line 1: 'str object' has no attribute 'nosuchmethod'");
}

TEST_CASE("jinja: errors at load time name the construct and the line") {
    check_errors({
        {"ok\n{% include 'x.jinja' %}",
         "line 2: unsupported tag 'include' (chat templates render on their own: no inheritance, includes or imports)"},
        {"{% if x %}\n{% frobnicate %}{% endif %}",
         "line 2: unknown tag 'frobnicate' (the innermost open block is 'if' from line 1)"},
        {"\n\n{{ x|nosuchfilter }}", "line 3: unknown filter 'nosuchfilter'"},
        {"{% if x is nosuchtest %}{% endif %}", "line 1: unknown test 'nosuchtest'"},
        {"{% for x in xs %}\n{{ x }}",
         "line 2: unexpected end of template: expected 'endfor' or 'else' to close the 'for' from line 1"},
        {"{% break %}", "line 1: 'break' outside of a for loop"},
        {"{{ 1 + }}", "line 1: unexpected end of print statement '}}'"},
        {"{{ 'abc }}", "line 1: unterminated string literal"},
        {"{# never closed", "line 1: missing end of comment tag '#}'"},
        {"a\n{{ (1 }}", "line 2: unexpected '}', expected ')'"},
        {"{% endif %}", "line 1: unknown tag 'endif'"},
    });
    // A chat template is checked when it is loaded, not when first rendered.
    CHECK_THROWS_WITH_AS(ChatTemplate::from_source("{{ messages|nosuch }}"),
                         "chat template syntax error at line 1: unknown filter 'nosuch'", ChatTemplateError);
}

TEST_CASE("jinja: errors at render time carry their message") {
    check_errors({
        {"a\n{{ raise_exception('Roles must alternate') }}", "line 2: Roles must alternate"},
        {"{{ 1 + 'a' }}", "line 1: unsupported operand type(s) for +: 'int' and 'str'"},
        {"{{ nothing + 1 }}", "line 1: 'nothing' is undefined"},
        {"{{ nothing() }}", "line 1: 'nothing' is undefined"},
        {"{{ 'a'() }}", "line 1: 'str' object is not callable"},
        {"{{ 1 / 0 }}", "line 1: division by zero"},
        {"{% for x in 5 %}{% endfor %}", "line 1: 'int' object is not iterable"},
        {"{% for a, b in [1] %}{% endfor %}", "line 1: cannot unpack non-iterable int object"},
    });
    try {
        ChatTemplate::from_source("{{ raise_exception('System role not supported') }}").render({}, false);
        FAIL("no error");
    } catch (const ChatTemplateError& e) {
        CHECK(std::string(e.what()) == "chat template: System role not supported");
    }
}

TEST_CASE("jinja: limits stop runaway templates") {
    CHECK(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").find("nested too deeply") != std::string::npos);
    jinja::RenderLimits small;
    small.max_steps = 100000;
    CHECK(error_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "{}", small)
              .find("ran too long") != std::string::npos);
    jinja::RenderLimits small_strings;
    small_strings.max_string_bytes = 1 << 20;
    CHECK(error_of("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}", "{}",
                   small_strings) == "line 1: a string or list grew past the limit of 1048576 bytes");
    CHECK(error_of("{{ range(1000000) }}").find("range too big") != std::string::npos);
    CHECK(error_of("{{ " + std::string(300, '(') + "1" + std::string(300, ')') + " }}") == "line 1: expression nested too deeply");
    CHECK(error_of("{{ 1" + std::string(300, '+') + " }}").find("line 1") != std::string::npos);
    std::string chain = "{{ 0";
    for (int i = 0; i < 300; ++i) chain += " + 1";
    CHECK(error_of(chain + " }}") == "line 1: expression nested too deeply");
    std::string nested;
    for (int i = 0; i < 150; ++i) nested += "{% if true %}";
    CHECK(error_of(nested).find("nested too deeply") != std::string::npos);
    // A namespace that holds itself must neither loop forever nor leak.
    CHECK(error_of("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}").find("nested too deeply") != std::string::npos);
}

TEST_CASE("jinja: chat templates, built-in and from source") {
    boost::json::array messages = boost::json::parse(R"([{"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "Bye"}])").as_array();
    CHECK(ChatTemplate::builtin("chatml", "", "").render(messages, true) ==
          "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
          "<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
    CHECK(ChatTemplate::builtin("llama2", "<s>", "</s>").render(messages, false) ==
          "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello! </s><s>[INST] Bye [/INST]");
    CHECK(ChatTemplate::builtin("llama3", "<|begin_of_text|>", "<|eot_id|>").render(messages, true) ==
          "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
          "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
          "Hello!<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
          "<|start_header_id|>assistant<|end_header_id|>\n\n");
    CHECK(ChatTemplate::builtin("gemma", "<bos>", "<eos>").render(messages, true) ==
          "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
          "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n");
    CHECK_THROWS_WITH_AS(ChatTemplate::builtin("nosuch", "", ""),
                         "no built-in chat template named 'nosuch' (built-ins: chatml, llama2, llama3, gemma, phi3)",
                         ChatTemplateError);
    CHECK_THROWS_AS(ChatTemplate::from_file_or_name("/nonexistent/t.jinja", "", ""), ChatTemplateError);
    // tools arrive as the template's `tools`, extra keys as more variables.
    const ChatTemplate t = ChatTemplate::from_source("{{ bos_token }}{{ tools|tojson }}|{{ date_string }}|{{ tools is none }}", "<s>");
    CHECK(t.render({}, false, boost::json::parse(R"([{"name": "f"}])"), boost::json::object{{"date_string", "1 Jan"}}) ==
          R"(<s>[{"name": "f"}]|1 Jan|False)");
    CHECK(t.render({}, false) == "<s>null||True");
}
