"""Chat templates rendered by minfer's own Jinja interpreter, byte for byte
against Python's jinja2 set up as Hugging Face transformers sets it up for
apply_chat_template: every real template in ../shared/chat-templates, with
conversations of every shape (system, multi-turn, tool calls and results,
non-ASCII, stray whitespace, empty), with and without the generation prompt.
Where jinja2 raises (a template that rejects the conversation), minfer must
fail with one line, and with the template's own message for raise_exception.
"""
import json
import subprocess
import sys
from datetime import datetime

import jinja2
import jinja2.ext
import jinja2.sandbox
import pytest

from conftest import MODEL, SHARED, minfer_bin

TEMPLATES = sorted((SHARED / "chat-templates").glob("*.jinja"))


# ---- the oracle: jinja2 as transformers uses it ------------------------------------------

class RaisedByTemplate(jinja2.exceptions.TemplateError):
    pass


def oracle_env():
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = lambda x, indent=None, separators=None, sort_keys=False: json.dumps(
        x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise RaisedByTemplate(message)

    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda f: datetime.now().strftime(f)
    return env


def oracle_render(source, conv, add_generation_prompt, bos, eos):
    """(text, None) or (None, exception)."""
    try:
        template = oracle_env().from_string(source)
        return template.render(messages=conv["messages"], tools=conv.get("tools"),
                               add_generation_prompt=add_generation_prompt, bos_token=bos, eos_token=eos,
                               **conv.get("extra", {})), None
    except Exception as e:  # noqa: BLE001 - any failure of the oracle is an expected failure of minfer
        return None, e


# ---- minfer ----------------------------------------------------------------------------------

def run_bytes(*args):
    """The binary's stdout as exact bytes (no newline translation), stderr as text."""
    proc = subprocess.run([minfer_bin(), *map(str, args)], capture_output=True, timeout=60)
    return proc.returncode, proc.stdout, proc.stderr.decode("utf-8", "replace")


def write_conversation(path, conv):
    doc = {"messages": conv["messages"], **({"tools": conv["tools"]} if "tools" in conv else {}), **conv.get("extra", {})}
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return path


def minfer_render(tmp_path, template_arg, conv, add_generation_prompt, bos, eos):
    messages = write_conversation(tmp_path / "conversation.json", conv)
    args = ["chat-template", "--template", template_arg, f"--bos-token={bos}", f"--eos-token={eos}", "--messages", messages]
    if add_generation_prompt:
        args.append("--add-generation-prompt")
    return run_bytes(*args)


def assert_same_as_oracle(result, expected, error):
    rc, out, err = result
    if error is None:
        assert rc == 0, f"minfer failed where jinja2 rendered:\n{err}\nexpected:\n{expected!r}"
        assert out.decode("utf-8") == expected
        return
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 1, f"jinja2 raised {type(error).__name__}: {error}, but minfer exited {rc}:\n{out!r}\n{err}"
    assert len(lines) == 1, err
    if isinstance(error, RaisedByTemplate):
        assert str(error) in lines[0]


# ---- conversations ---------------------------------------------------------------------------

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather",
    "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city, e.g. Paris"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"}},
        "required": ["city"]}}}
SEARCH_TOOL = {"type": "function", "function": {
    "name": "search",
    "description": "Search the web for pages about a query — für Seiten 🔎",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string", "description": "What to look for"},
        "max_results": {"type": "integer", "description": "How many results", "default": 5, "minimum": 1,
                        "maximum": 20},
        "filters": {"type": "array", "items": {"type": "string"}, "description": "Site filters",
                    "examples": [["a.com", "b.org"]]},
        "safe": {"type": "boolean", "description": "Safe search", "nullable": True},
        "options": {"type": "object", "properties": {"lang": {"type": "string", "description": "Language"}},
                    "description": "More options"}},
        "required": ["query"]}}}
# A union type: Hermes' and Command R+'s json_to_python_type recurse forever on
# "null" (a string is iterable), which jinja2 ends with a RecursionError.
UNION_TOOL = {"type": "function", "function": {
    "name": "set_flag", "description": "Set or clear a flag",
    "parameters": {"type": "object", "properties": {"flag": {"type": ["boolean", "null"], "description": "The flag"}},
                   "required": []}}}

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
USER = {"role": "user", "content": "What is the capital of France?"}
ASSISTANT = {"role": "assistant", "content": "The capital of France is Paris."}
USER2 = {"role": "user", "content": "And of Italy?"}
ASSISTANT2 = {"role": "assistant", "content": "<think>Rome, surely.</think>Rome."}


def tool_turns(arguments, content=None, calls=1):
    call = {"id": "call12345", "type": "function", "function": {"name": "get_weather", "arguments": arguments}}
    second = {"id": "call67890", "type": "function", "function": {"name": "search", "arguments": arguments}}
    return [
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": content, "tool_calls": [call, second][:calls]},
        {"role": "tool", "tool_call_id": "call12345", "name": "get_weather", "content": "{\"temperature\": 22}"},
        *([{"role": "tool", "tool_call_id": "call67890", "name": "search", "content": "no results"}] if calls > 1 else []),
        {"role": "assistant", "content": "It is 22 °C in Paris."},
    ]


# firefunction-v2 renders only with these two (its users pass them).
FIREFUNCTION_EXTRA = {"functions": json.dumps([WEATHER_TOOL["function"]]), "datetime": "2024-07-26"}
DICT_ARGS = {"city": "Paris", "unit": "celsius"}
STRING_ARGS = json.dumps(DICT_ARGS)

CONVERSATIONS = {
    "system_user": {"messages": [SYSTEM, USER]},
    "user_only": {"messages": [USER]},
    "multi_turn": {"messages": [USER, ASSISTANT, USER2]},
    "system_multi_turn": {"messages": [SYSTEM, USER, ASSISTANT, USER2, ASSISTANT2]},
    "unicode": {"messages": [
        {"role": "system", "content": "Tu es un assistant. 日本語で答えて 🙂"},
        {"role": "user", "content": "Grüße! Ça va? 👋🏽 — “quotes”, 'single', \\backslash\\ and \"double\""},
        {"role": "assistant", "content": "Très bien 🙂 ½ ∑ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢"},
        {"role": "user", "content": "Ωμέγα, кириллица, עברית"}]},
    "whitespace": {"messages": [
        {"role": "system", "content": "  padded system prompt  \n"},
        {"role": "user", "content": "\n  leading and trailing  \n\n"},
        {"role": "assistant", "content": "  reply\t"},
        {"role": "user", "content": " next\u00a0"}]},
    "tools_no_call": {"messages": [SYSTEM, USER], "tools": [WEATHER_TOOL, SEARCH_TOOL]},
    "tool_call_dict_args": {"messages": [SYSTEM, *tool_turns(DICT_ARGS)], "tools": [WEATHER_TOOL, SEARCH_TOOL]},
    "tool_call_string_args": {"messages": [SYSTEM, *tool_turns(STRING_ARGS)], "tools": [WEATHER_TOOL]},
    "tool_call_empty_content": {"messages": tool_turns(STRING_ARGS, content=""), "tools": [WEATHER_TOOL]},
    "two_tool_calls": {"messages": tool_turns(DICT_ARGS, calls=2), "tools": [WEATHER_TOOL, SEARCH_TOOL]},
    "extra_variables": {"messages": [SYSTEM, USER], "tools": [WEATHER_TOOL],
                        "extra": {"date_string": "26 Jul 2024", "datetime": "2024-07-26",
                                  "functions": json.dumps([WEATHER_TOOL["function"]]),
                                  "documents": [{"title": "Paris", "text": "Paris is the capital of France."}]}},
    "tools_multi_turn": {"messages": [USER, ASSISTANT, USER2], "tools": [WEATHER_TOOL, SEARCH_TOOL],
                         "extra": FIREFUNCTION_EXTRA},
    "tools_unicode": {"messages": [
        {"role": "user", "content": "  Wetter in Köln? 🌧️ \n"},
        {"role": "assistant", "content": "Ich schaue nach… ☂"},
        {"role": "user", "content": "日本語でお願いします"}], "tools": [SEARCH_TOOL], "extra": FIREFUNCTION_EXTRA},
    "tool_call_full": {"messages": tool_turns(STRING_ARGS), "tools": [WEATHER_TOOL, SEARCH_TOOL],
                       "extra": FIREFUNCTION_EXTRA},
    "tool_result_object": {"messages": [
        *tool_turns(DICT_ARGS)[:2],
        {"role": "tool", "tool_call_id": "call12345", "content": {"temperature": 22, "sky": "clear ☀"}}],
        "tools": [WEATHER_TOOL], "extra": FIREFUNCTION_EXTRA},
    "union_type_tool": {"messages": [USER], "tools": [UNION_TOOL], "extra": FIREFUNCTION_EXTRA},
    "empty": {"messages": []},
}


# (name fragment, BOS, EOS), checked in this order; the first fragment in the name wins.
SPECIAL_TOKENS = [
    ("gemma", "<bos>", "<eos>"),
    ("deepseek", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    ("qwen", "", "<|im_end|>"),
    ("mistral", "<s>", "</s>"),
    ("phi", "<s>", "<|endoftext|>"),
    ("cohere", "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"),
    ("hermes", "<|begin_of_text|>", "<|im_end|>"),
]


def special_tokens(name):
    """BOS and EOS as the model family's tokenizer has them."""
    n = name.lower()
    for fragment, bos, eos in SPECIAL_TOKENS:
        if fragment in n:
            return bos, eos
    return "<|begin_of_text|>", "<|eot_id|>"  # Llama 3 family, functionary, firefunction


def test_the_templates_are_there():
    assert len(TEMPLATES) >= 10, f"no chat templates in {SHARED / 'chat-templates'}"


@pytest.mark.parametrize("add_generation_prompt", [False, True], ids=["nogen", "gen"])
@pytest.mark.parametrize("conv_name", list(CONVERSATIONS))
@pytest.mark.parametrize("template", TEMPLATES, ids=[t.stem for t in TEMPLATES])
def test_real_templates_match_jinja2(tmp_path, template, conv_name, add_generation_prompt):
    source = template.read_bytes().decode("utf-8")
    conv = CONVERSATIONS[conv_name]
    bos, eos = special_tokens(template.name)
    expected, error = oracle_render(source, conv, add_generation_prompt, bos, eos)
    result = minfer_render(tmp_path, template, conv, add_generation_prompt, bos, eos)
    assert_same_as_oracle(result, expected, error)


# ---- the interpreter, construct by construct ------------------------------------------------------

# Small templates, each exercising a corner of Jinja2 or of Python's semantics
# that real templates lean on; the last ones must fail as jinja2 fails.
SNIPPETS = [
    # output of values
    "{{ 1 }}|{{ -0.0 }}|{{ 1.5e300 * 1e10 }}|{{ 3.0 * 2 }}|{{ 2 ** -1 }}|{{ 10 % 3.5 }}|{{ -7 // 2.0 }}",
    "{{ 'x' ~ [1, 'a'] ~ {'k': none} ~ (1, 2) }}",
    "{{ ['a\\nb', \"it's\", 'say \"hi\"', 'both \\' \"'] }}",
    "{{ [1.0, 1e-7, 123456789012345678] }}",
    "{{ messages[0] }}",
    "{{ messages|length }} {{ messages[-1].role }} {{ messages[0]['content'][:4] }}",
    # truthiness and logic
    "{{ [] or 'e' }} {{ {} or 'd' }} {{ '' or 0 or none }} {{ 'a' and 'b' }} {{ not [] }} {{ not 'x' }}",
    "{% if messages %}yes{% endif %}{% if not tools %}no tools{% endif %}",
    "{{ none is none }} {{ nothing is none }} {{ nothing is undefined }} {{ none == nothing }}",
    # comparison
    "{{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ (1, 'a') == (1, 'a') }} {{ [1] == (1,) }} {{ 1 != 1.0 }}",
    "{{ {'a': 1, 'b': 2} == {'b': 2, 'a': 1} }} {{ messages[0] == messages[0] }}",
    # strings
    "{{ 'Hello'[1:-1] }} {{ 'Hello'[::2] }} {{ 'Hello'[10:] }} {{ 'héllo'[-3:] }} {{ 'abc'[-10:2] }}",
    "{{ 'a b c'.split(' ', 1) }} {{ 'a b c'.rsplit(' ', 1) }} {{ ''.split() }} {{ ''.split(',') }}",
    "{{ '  x  '.lstrip() }}|{{ '  x  '.rstrip() }}|{{ 'xyx'.strip('x') }}|{{ 'abc'.replace('', '-') }}",
    "{{ 'Hello World'.title() }} {{ 'hello world'.capitalize() }} {{ 'x ßa'.upper() }} {{ 'ÀÉÎ'.lower() }}",
    "{{ 'a-b_c d'.title() }} {{ 'they\\'re 2nd'.title() }} {{ 'they\\'re 2nd'|title }}",
    "{{ 'abc'.find('z') }} {{ 'abcabc'.rfind('b') }} {{ 'abc'.index('c') }} {{ 'a,b'.count(',') }}",
    "{{ '123'.isdigit() }} {{ 'abc'.isalpha() }} {{ '  '.isspace() }} {{ 'Ab'.islower() }} {{ 'AB'.isupper() }}",
    "{{ 'prefix_x'.removeprefix('prefix_') }} {{ 'x.txt'.removesuffix('.txt') }} {{ 'a\\nb\\r\\nc'.splitlines() }}",
    "{{ '{0}-{1}-{0}'.format('a', 'b') }} {{ '{x!r}'.format(x='q') }}",
    # filters
    "{{ messages|map(attribute='role')|join('/') }} {{ messages|map(attribute='nope')|list }}",
    "{{ messages|selectattr('role', 'eq', 'user')|list|length }} {{ messages|rejectattr('role', 'in', ['user'])|map(attribute='role')|list }}",
    "{{ [3, 1, 2]|sort(reverse=true)|join }} {{ ['b', 'A', 'c']|sort(case_sensitive=true)|join }} {{ [{'n': 2}, {'n': 1}]|sort(attribute='n')|map(attribute='n')|join }}",
    "{{ ['a', 'B', 'b', 'A']|unique|list }} {{ ['a', 'B', 'b', 'A']|unique(case_sensitive=true)|list }} {{ [1, 1.0, true, 2]|unique|list }}",
    "{{ 'abc'|list }} {{ {'a': 1}|list }} {{ 'abc'|first }} {{ 'abc'|last }} {{ []|first }}|{{ nothing|first }}",
    "{{ 'x'|center(7) }}|{{ 'ab'|center(7) }}|{{ 42|string|length }}",
    "{{ 'a <b> & \"c\"'|e }} {{ 'a <b>'|escape|safe }} {{ ('<' ~ 'b')|e }}",
    "{{ 3.7|int }} {{ -3.7|int }} {{ '0x1A'|int(0, 16) }} {{ ' 12 '|int }} {{ '1_000'|int }} {{ none|int }} {{ true|int }}",
    "{{ '1e3'|float }} {{ 'inf'|float }} {{ 'abc'|float(1.5) }} {{ none|float }}",
    "{{ 1234.5678|round(2) }} {{ 0.5|round }} {{ 1.5|round }} {{ -2.5|round }} {{ 2.345|round(2, 'ceil') }}",
    "{{ [1, 2, 3]|sum }} {{ [1.5, 2]|sum }} {{ [[1], [2]]|sum(start=[]) }} {{ [{'v': 2}, {'v': 3}]|sum(attribute='v') }}",
    "{{ [3, 1, 2]|max }} {{ ['b', 'A', 'c']|min }} {{ []|max }}|{{ [{'a': 2}, {'a': 5}]|max(attribute='a') }}",
    "{{ 'one  two\\tthree\\nfour'|wordcount }} {{ ''|wordcount }} {{ 'a-b c_d'|wordcount }}",
    "{{ {'b': 1, 'a': 2}|dictsort(by='value') }} {{ {'b': 1, 'A': 2}|dictsort(reverse=true) }}",
    "{{ 'x'|default('y') }} {{ none|default('y') }} {{ nothing|default }}|{{ 0|default('z', true) }} {{ false|d('f', boolean=true) }}",
    "{{ [1, 2, 3, 4, 5]|batch(2)|map('join', ',')|join(';') }}",
    "{{ ['a', 'b']|map('upper')|list }} {{ [' a ', 'b ']|map('trim')|join('|') }} {{ [1, 2]|map('string')|join }}",
    "{{ [1, 0, 2]|select|list }} {{ [1, 0, 2]|reject|list }} {{ [1, 2, 3, 4]|select('divisibleby', 2)|list }} {{ ['a', 1]|select('string')|list }}",
    "{{ messages|tojson }}",
    "{{ messages|tojson(indent=4) }}",
    "{{ {'nested': {'list': [1, [2, []], {}], 'str': 'é\\u0001\\t'}}|tojson(indent=1) }}",
    "{{ 'a\\u2028b\\x7f'|tojson }} {{ 1.0|tojson }} {{ [1e100, -0.0]|tojson }} {{ none|tojson }}",
    "{{ {1: 'a', 2.5: 'b', true: 'c', none: 'd'}|tojson }}",
    "{{ tools|tojson(separators=(',', ':'), sort_keys=true) }}",
    "{{ 'line1\\nline2\\n'|indent }}|{{ 'a\\n\\nb'|indent(width=1, blank=true) }}|{{ 'a\\nb'|indent('> ') }}",
    "{{ 'a\\nb'|indent(first=true) }}|{{ ''|indent(first=true) }}|{{ 'x\\n'|indent(2, true, true) }}",
    "{{ {'a': 1, 'b': 2}|items|list }} {{ nothing|items|list }}",
    "{{ 'abc'|replace('b', 'B') }} {{ 'aaa'|replace('a', '') }} {{ 'x'|replace('x', 'y', 0) }}",
    "{{ [1, 2, 3]|reverse|join }} {{ 'héllo'|reverse }} {{ (1, 2)|reverse|list }}",
    "{{ 'Hello World'|lower|upper|capitalize }} {{ 'ß'|upper }} {{ 'hello'|title|length }}",
    "{{ [1, 2]|join(attribute='x') }}|{{ messages|join(', ', attribute='role') }}",
    "{{ 'abc'|trim('ac') }} {{ '\\u00a0x\\u3000'|trim }}|",
    "{{ 'mystring'|attr('upper')() }} {{ messages[0]|attr('role') }}",
    "{{ '%s=%r'|format('k', 'v') }} {{ '%(a)s-%(b)d'|format(a='x', b=3) }} {{ '%d%%'|format(50) }} {{ '%5.2f|%-4s|%x'|format(3.14159, 'ab', 255) }}",
    # tests
    "{{ 3 is odd }} {{ 3.0 is odd }} {{ 0 is even }} {{ 10 is divisibleby 5 }} {{ 'a' is sequence }} {{ 1 is iterable }}",
    "{{ messages is sequence }} {{ messages[0] is mapping }} {{ range(2) is sequence }} {{ none is string }} {{ true is number }}",
    "{{ 2 is ge 2 }} {{ 2 is le 1 }} {{ 'b' is greaterthan 'a' }} {{ 1 is lessthan 2 }} {{ 1 is sameas 1 }} {{ none is sameas none }}",
    "{{ 'upper' is filter }} {{ 'nope' is filter }} {{ 'odd' is test }} {{ 'ABC' is upper }}",
    # loops
    "{% for m in messages %}{{ loop.index }}/{{ loop.length }}:{{ m.role }}{% if not loop.last %}, {% endif %}{% endfor %}",
    "{% for m in messages if m.role != 'system' %}{{ loop.index0 }}{{ m.role[0] }}{% else %}none{% endfor %}",
    "{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}{{ v }}{{ loop.revindex }}{% endfor %}",
    "{% for x in range(5) %}{% if x is odd %}{% continue %}{% endif %}{{ x }}{% endfor %}",
    "{% for x in range(3) %}{% for y in range(3) %}{% if y > x %}{% break %}{% endif %}{{ x }}{{ y }} {% endfor %}{% endfor %}",
    "{% for x in [] %}{% else %}{% for y in [1] %}{{ y }}{% endfor %}{% endfor %}",
    "{% for x in range(1, 10, 3) %}{{ x }}{% endfor %} {% for x in range(5, 0, -2) %}{{ x }}{% endfor %} {{ range(3)|list }}",
    "{% for x in 'ab' %}{{ loop.cycle(1, 2, 3) }}{{ loop.first }}{% endfor %}",
    "{% set x = 'outer' %}{% for i in [1] %}{% set x = 'inner' %}{{ x }}{% endfor %}{{ x }}",
    "{% for i in [1, 2] %}{% if loop.first %}{% set first = i %}{% endif %}[{{ first }}]{% endfor %}",
    # macros
    "{% macro m(a, b=a * 2) %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}{{ m(1, 5) }}{{ m(b=3, a=4) }}",
    "{% macro m(a) %}[{{ a }}]{% endmacro %}{{ m() }}{{ m(none) }}",
    "{% macro outer() %}{% macro inner() %}in{% endmacro %}{{ inner() }}-out{% endmacro %}{{ outer() }}",
    "{% macro list_items(items) %}{% for i in items %}<{{ caller(i) }}>{% endfor %}{% endmacro %}{% call(x) list_items([1, 2]) %}{{ x * 10 }}{% endcall %}",
    "{% set ns = namespace(found=false, items=[]) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.found = true %}{% set ns.items = ns.items + [m.content] %}{% endif %}{% endfor %}{{ ns.found }} {{ ns.items }}",
    "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}{{ ns.c }}|",
    "{% set d = dict(a=1, b='x') %}{{ d }} {{ dict(d, c=3) }} {{ dict([('k', 'v')]) }}",
    # whitespace control
    "a  {%- if true -%}  b  {%- endif -%}  c",
    "x\n    {% if true %}\n    y\n    {% endif %}\nz",
    "x\n    {%- if true %}\n    y\n    {% endif -%}\nz",
    "{% for i in [1, 2] %}\n  {{ i }}\n{% endfor %}\n",
    "{{ 'a' }}\n{{ 'b' }}\n\n{# c #}\n  {# d #}  \nend",
    "  {{ 'var' }}  {% if true %}  blk  {% endif %}  ",
    "{% raw -%}\n  {{ raw }}\n{%- endraw %}|{% raw %}\n{% if %}\n{% endraw %}",
    "start\n{%- set x = 1 -%}\n\n  middle  \n{%+ if true +%}\n  keep\n{% endif %}",
    "\t{% if true %}\ttab{% endif %}\n \t {%- if true %}x{% endif %}",
    "{% if true %}a{% endif %}\r\n{% if true %}\rb{% endif %}\r\n",
    # conditional expressions and precedence
    "{{ 'a' if messages else 'b' }} {{ 1 if 0 else 2 if 0 else 3 }} {{ ('x' if true else 'y')|upper }}",
    "{{ 1 + 2 ~ 3 * 2 }} {{ 2 * 3 ** 2 }} {{ -1 ** 2 }} {{ not 1 == 2 }} {{ 1 in [1] == true }}",
    "{{ [1, 2, 3][1:][0] }} {{ {'a': [1, 2]}['a'][-1] }} {{ messages[0].content.upper()[:3] }}",
    "{{ 'abc' 'def' }} {{ 'a' + 'b' * 2 }} {{ [0] * 3 }} {{ (1,) * 2 }} {{ 3 * 'ab' }}",
    "{{ 7 / 2 }} {{ 7 // -2 }} {{ -7 % 2 }} {{ 7 % -2 }} {{ 2 ** 62 }} {{ 0.1 * 3 }} {{ 1 / 3 }}",
    "{{ 1e-4 }} {{ 1e-5 }} {{ 123456789.123 }} {{ 1e22 }} {{ 12345678901234567.0 }} {{ 0.000123 }}",
    # errors must also match (the oracle raises)
    "{{ raise_exception('custom: ' ~ messages|length) }}",
    "{{ messages[0].content.nope.deeper }}",
    "{{ 1 < 'a' }}",
    "{{ [1, 2]|tojson }}{{ (messages|map(attribute='role'))|tojson }}",
    "{% for a, b in ['abc'] %}{% endfor %}",
    "{{ range(200000)|length }}",
    "{{ 'a'.nope() }}",
    "{{ nothing.attr }}",
    "{{ nothing['key'] }}",
    "{{ 'abc' - 1 }}",
    "{{ {'a': 1}|items|length }}",
    "{{ [1]|last }}{{ ([1]|map('string'))|last }}",
    "{% set x.y = 1 %}",
]


SNIPPET_CONVERSATION = {"messages": [{"role": "system", "content": "Sys"}, {"role": "user", "content": "Hello there"},
                                     {"role": "assistant", "content": "Hi!"}], "tools": [WEATHER_TOOL]}


@pytest.mark.parametrize("index", range(len(SNIPPETS)))
def test_snippets_match_jinja2(tmp_path, index):
    template = tmp_path / "snippet.jinja"
    template.write_bytes(SNIPPETS[index].encode("utf-8"))
    expected, error = oracle_render(SNIPPETS[index], SNIPPET_CONVERSATION, False, "<s>", "</s>")
    assert_same_as_oracle(minfer_render(tmp_path, template, SNIPPET_CONVERSATION, False, "<s>", "</s>"), expected, error)


# ---- built-in templates -----------------------------------------------------------------------

BUILTINS = ["chatml", "llama2", "llama3", "gemma", "phi3"]


def test_builtin_list():
    rc, out, err = run_bytes("chat-template", "--list")
    assert rc == 0, err
    assert out.decode().split() == BUILTINS


@pytest.mark.parametrize("conv_name", ["system_user", "user_only", "multi_turn", "system_multi_turn", "unicode",
                                       "whitespace"])
@pytest.mark.parametrize("name", BUILTINS)
def test_builtins_match_their_source_in_jinja2(tmp_path, name, conv_name):
    rc, source, err = run_bytes("chat-template", "--template", name, "--print-source")
    assert rc == 0, err
    bos, eos = {"llama2": ("<s>", "</s>"), "llama3": ("<|begin_of_text|>", "<|eot_id|>"),
                "gemma": ("<bos>", "<eos>"), "phi3": ("<s>", "<|endoftext|>")}.get(name, ("", ""))
    for add_generation_prompt in (False, True):
        expected, error = oracle_render(source.decode(), CONVERSATIONS[conv_name], add_generation_prompt, bos, eos)
        result = minfer_render(tmp_path, name, CONVERSATIONS[conv_name], add_generation_prompt, bos, eos)
        assert_same_as_oracle(result, expected, error)


def test_builtins_are_the_real_formats(tmp_path):
    conv = {"messages": [SYSTEM, USER, ASSISTANT, USER2]}
    rc, out, err = minfer_render(tmp_path, "chatml", conv, True, "", "")
    assert out.decode() == ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                            "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
                            "<|im_start|>assistant\nThe capital of France is Paris.<|im_end|>\n"
                            "<|im_start|>user\nAnd of Italy?<|im_end|>\n<|im_start|>assistant\n"), err
    rc, out, err = minfer_render(tmp_path, "llama2", conv, False, "<s>", "</s>")
    assert out.decode() == ("<s>[INST] <<SYS>>\nYou are a helpful assistant.\n<</SYS>>\n\n"
                            "What is the capital of France? [/INST] The capital of France is Paris. </s>"
                            "<s>[INST] And of Italy? [/INST]"), err
    rc, out, err = minfer_render(tmp_path, "llama3", {"messages": [USER]}, True, "<|begin_of_text|>", "<|eot_id|>")
    assert out.decode() == ("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n"
                            "What is the capital of France?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"), err
    rc, out, err = minfer_render(tmp_path, "gemma", conv, True, "<bos>", "<eos>")
    assert out.decode() == ("<bos><start_of_turn>user\nYou are a helpful assistant.\n\nWhat is the capital of France?"
                            "<end_of_turn>\n<start_of_turn>model\nThe capital of France is Paris.<end_of_turn>\n"
                            "<start_of_turn>user\nAnd of Italy?<end_of_turn>\n<start_of_turn>model\n"), err


# ---- a model's own template and tokens ---------------------------------------------------------

def test_model_without_template_uses_chatml(tmp_path):
    messages = write_conversation(tmp_path / "c.json", {"messages": [SYSTEM, USER]})
    rc, out, err = run_bytes("chat-template", MODEL, "--messages", messages, "--add-generation-prompt")
    assert rc == 0, err
    assert out.decode() == ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                            "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n")


def test_model_template_and_token_pieces(tmp_path):
    source = "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}{{ eos_token }}{% endfor %}"
    model = tmp_path / "with-template.gguf"
    subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_new_metadata", str(MODEL), str(model),
                    "--chat-template", source], check=True, capture_output=True)
    messages = write_conversation(tmp_path / "c.json", {"messages": [USER]})
    rc, out, err = run_bytes("chat-template", model, "--messages", messages)
    assert rc == 0, err
    assert out.decode() == "<s>[user] What is the capital of France?</s>"  # stories260K: llama2.c's <s> and </s>
    rc, out, err = run_bytes("chat-template", model, "--messages", messages, "--template", "llama3")
    assert out.decode().startswith("<s><|start_header_id|>user"), err  # --template replaces the model's
    rc, out, err = run_bytes("chat-template", model, "--print-source")
    assert out.decode() == source, err


def test_vocab_file_templates(tmp_path):
    """A real model's template (Phi-3) and a byte-level BPE file's pieces, read from the metadata if need be."""
    import gguf
    phi3 = SHARED / "vocab" / "ggml-vocab-phi-3.gguf"
    reader = gguf.GGUFReader(str(phi3))
    field = reader.fields["tokenizer.chat_template"]
    source = bytes(field.parts[field.data[0]]).decode("utf-8")
    conv = CONVERSATIONS["system_multi_turn"]
    expected, error = oracle_render(source, conv, True, "<s>", "<|endoftext|>")
    messages = write_conversation(tmp_path / "c.json", conv)
    assert_same_as_oracle(run_bytes("chat-template", phi3, "--messages", messages, "--add-generation-prompt"),
                          expected, error)

    bpe = SHARED / "vocab" / "ggml-vocab-deepseek-llm.gguf"
    reader = gguf.GGUFReader(str(bpe))

    def field_value(key):
        f = reader.fields[key]
        return f.parts[f.data[0]]

    tokens = reader.fields["tokenizer.ggml.tokens"]
    piece = lambda i: bytes(tokens.parts[tokens.data[i]]).decode("utf-8")  # noqa: E731
    bos = piece(int(field_value("tokenizer.ggml.bos_token_id")[0]))
    eos = piece(int(field_value("tokenizer.ggml.eos_token_id")[0]))
    probe = tmp_path / "probe.jinja"
    probe.write_text("{{ bos_token }}|{{ eos_token }}")
    rc, out, err = run_bytes("chat-template", bpe, "--template", probe, "--messages", messages)
    assert rc == 0, err
    assert out.decode() == f"{bos}|{eos}"


# ---- bad input: one clear line, non-zero exit -------------------------------------------------

def assert_clean_failure(result, code, *needles):
    rc, out, err = result
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == code, (rc, err)
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_bad_inputs(tmp_path):
    good = write_conversation(tmp_path / "good.json", {"messages": [USER]})
    assert_clean_failure(run_bytes("chat-template", "--template", "chatml", "--messages", tmp_path / "absent.json"), 1,
                         "absent.json")
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('[{"role": "user", "content": "hi"')
    assert_clean_failure(run_bytes("chat-template", "--template", "chatml", "--messages", bad_json), 1, "bad.json",
                         "invalid JSON")
    wrong_shape = tmp_path / "shape.json"
    wrong_shape.write_text('{"msgs": []}')
    assert_clean_failure(run_bytes("chat-template", "--template", "chatml", "--messages", wrong_shape), 1, "messages")
    broken = tmp_path / "broken.jinja"
    broken.write_text("{% for m in messages %}\n{{ m.content }\n{% endfor %}")
    assert_clean_failure(run_bytes("chat-template", "--template", broken, "--messages", good), 1, "broken.jinja",
                         "line 2")
    unknown_tag = tmp_path / "tag.jinja"
    unknown_tag.write_text("{% include 'other.jinja' %}")
    assert_clean_failure(run_bytes("chat-template", "--template", unknown_tag, "--messages", good), 1, "include",
                         "line 1")
    unknown_filter = tmp_path / "filter.jinja"
    unknown_filter.write_text("\n{{ messages|shuffle }}")
    assert_clean_failure(run_bytes("chat-template", "--template", unknown_filter, "--messages", good), 1,
                         "unknown filter 'shuffle'", "line 2")
    assert_clean_failure(run_bytes("chat-template", "--template", tmp_path / "absent.jinja", "--messages", good), 1,
                         "absent.jinja")
    assert_clean_failure(run_bytes("chat-template", "--template", "nosuchname", "--messages", good), 1, "chatml",
                         "llama3")
    assert_clean_failure(run_bytes("chat-template", "--messages", good), 2, "MODEL")
    assert_clean_failure(run_bytes("chat-template", "--template", "chatml"), 2, "--messages")
    assert_clean_failure(run_bytes("chat-template", "--template", "chatml", "--messages", good, "--bogus"), 2, "bogus")
    assert_clean_failure(run_bytes("chat-template", tmp_path / "absent.gguf", "--messages", good), 1, "absent.gguf")
    runtime = tmp_path / "runtime.jinja"
    runtime.write_text("{{ messages[0].content + 1 }}")
    assert_clean_failure(run_bytes("chat-template", "--template", runtime, "--messages", good), 1, "line 1",
                         "unsupported operand")
