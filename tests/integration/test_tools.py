"""Tool calling through `minfer serve` on a real model (SmolLM2-135M-Instruct):
tools in the prompt, calls constrained and read back as OpenAI `tool_calls`,
streamed as tool-call deltas, conversations that carry calls and results, and
the real openai client. Arguments are checked with the jsonschema package
against the tool's own parameters."""
import json
import os
import pathlib

import jinja2
import jsonschema
import pytest

from minfer_server import Server

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
SMOLLM2 = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
QWEN_TEMPLATE = SHARED / "chat-templates" / "Qwen-Qwen2.5-7B-Instruct.jinja"

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30},
                                                    "unit": {"enum": ["celsius", "fahrenheit"]}},
                   "required": ["city", "unit"], "additionalProperties": False}}}
ADD = {"type": "function", "function": {
    "name": "add", "description": "Adds two integers",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                   "required": ["a", "b"], "additionalProperties": False}}}
TOOLS = [WEATHER, ADD]
ASK = [{"role": "user", "content": "What is the weather in Paris, in celsius?"}]


@pytest.fixture(scope="module")
def model():
    if not SMOLLM2.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{SMOLLM2.name} is not downloaded under CI")
        pytest.skip(f"{SMOLLM2.name} is not downloaded: scripts/get-model.sh smollm2-135m")
    return SMOLLM2


def check_calls(calls, tools=TOOLS):
    by_name = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    assert calls, "no tool calls"
    for c in calls:
        assert c["type"] == "function" and c["id"].startswith("call_"), c
        assert c["function"]["name"] in by_name, c
        jsonschema.validate(json.loads(c["function"]["arguments"]), by_name[c["function"]["name"]])


def streamed(s, body):
    """The chunks of a streamed chat completion, and its choice 0 put together."""
    status, _, data = s.request("POST", "/v1/chat/completions", {**body, "stream": True}, timeout=300)
    assert status == 200, data
    chunks = [json.loads(line[6:]) for line in data.decode().split("\n")
              if line.startswith("data: ") and line != "data: [DONE]"]
    content, calls, finish = "", {}, None
    for ch in chunks:
        for c in ch["choices"]:
            d = c["delta"]
            content += d.get("content") or ""
            for t in d.get("tool_calls", []):
                call = calls.setdefault(t["index"], {"id": t.get("id"), "type": t.get("type"), "function": {"name": "", "arguments": ""}})
                call["function"]["name"] += t.get("function", {}).get("name", "")
                call["function"]["arguments"] += t.get("function", {}).get("arguments", "")
            finish = c["finish_reason"] or finish
    return content, [calls[i] for i in sorted(calls)], finish


@pytest.mark.parametrize("parser", ["json", "hermes"])
def test_required_calls_always_parse_and_validate(model, parser):
    with Server("--tool-call-parser", parser, model=model) as s:
        # One call each: every sample is a whole call whose arguments validate.
        status, _, data = s.request("POST", "/v1/chat/completions", {
            "messages": ASK, "tools": TOOLS, "tool_choice": "required", "parallel_tool_calls": False,
            "max_tokens": 80, "temperature": 1.0, "seed": 7, "n": 16}, timeout=300)
        assert status == 200, data
        for c in json.loads(data)["choices"]:
            assert c["finish_reason"] == "tool_calls" and c["message"]["content"] is None, c
            assert len(c["message"]["tool_calls"]) == 1, c
            check_calls(c["message"]["tool_calls"])
        # Parallel calls: a small model may go on calling until max_tokens; the whole calls validate.
        status, _, data = s.request("POST", "/v1/chat/completions", {
            "messages": ASK, "tools": TOOLS, "tool_choice": "required", "max_tokens": 80,
            "temperature": 1.0, "seed": 7, "n": 8}, timeout=300)
        for c in json.loads(data)["choices"]:
            assert c["finish_reason"] in ("tool_calls", "length"), c
            check_calls(c["message"]["tool_calls"])
        # A named function: only it is called; without parallel calls, once.
        status, _, data = s.request("POST", "/v1/chat/completions", {
            "messages": ASK, "tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "add"}},
            "parallel_tool_calls": False, "max_tokens": 60, "temperature": 1.0, "seed": 3, "n": 8}, timeout=300)
        for c in json.loads(data)["choices"]:
            assert c["finish_reason"] == "tool_calls", c
            assert [t["function"]["name"] for t in c["message"]["tool_calls"]] == ["add"], c
            check_calls(c["message"]["tool_calls"])
        # Streamed: the deltas add up to the same calls as the whole response (greedy).
        body = {"messages": ASK, "tools": TOOLS, "tool_choice": "required", "parallel_tool_calls": False,
                "max_tokens": 80, "temperature": 0}
        whole = json.loads(s.request("POST", "/v1/chat/completions", body, timeout=300)[2])["choices"][0]
        content, calls, finish = streamed(s, body)
        assert finish == whole["finish_reason"] == "tool_calls"
        assert content == ""
        assert [c["function"] for c in calls] == [c["function"] for c in whole["message"]["tool_calls"]]
        check_calls(calls)


def test_auto_none_and_conversations_with_calls(model):
    with Server(model=model) as s:
        # auto: the model may answer in prose (this one does); none: no parsing at all.
        for choice in ["auto", "none"]:
            body = {"messages": ASK, "tools": TOOLS, "tool_choice": choice, "max_tokens": 24, "temperature": 0}
            out = json.loads(s.request("POST", "/v1/chat/completions", body, timeout=300)[2])["choices"][0]
            assert out["finish_reason"] in ("stop", "length", "tool_calls"), out
            if out["finish_reason"] != "tool_calls":
                assert out["message"]["content"] and "tool_calls" not in out["message"], out
            content, calls, finish = streamed(s, body)
            assert (content, finish) == (out["message"]["content"] or "", out["finish_reason"]) or calls
        # A conversation with a call (content null, arguments a JSON string) and its result.
        conv = ASK + [{"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "18 degrees, sunny"}]
        status, _, data = s.request("POST", "/v1/chat/completions", {"messages": conv, "tools": TOOLS, "max_tokens": 16}, timeout=300)
        assert status == 200, data
        # Mistakes are 400s that name the field.
        for body, says in [({"tools": [{"type": "function"}]}, "tools[0]"),
                           ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "nope"),
                           ({"tool_choice": "required"}, "tool_choice"),
                           ({"tools": TOOLS, "tool_choice": "required", "response_format": {"type": "json_object"}}, "tools"),
                           ({"messages": ASK + [{"role": "assistant", "content": None, "tool_calls": [
                               {"type": "function", "function": {"name": "add", "arguments": "{a: 1}"}}]}]}, "arguments")]:
            status, _, data = s.request("POST", "/v1/chat/completions", {"messages": ASK, "max_tokens": 4, **body})
            assert status == 400 and says in json.loads(data)["error"]["message"], (body, data)


def test_tool_prompt_is_the_templates_own(model):
    """With a tool-aware template (Qwen2.5's, through --chat-template), the prompt
    of a conversation with tools and calls is what jinja2 renders, as
    transformers runs it (arguments as objects), and the parser is hermes."""
    template = QWEN_TEMPLATE.read_text()
    conv = ASK + [{"role": "assistant", "content": None, "tool_calls": [{
        "id": "call_1", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 1, \"b\": 2}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "3"}]
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda x, indent=None, separators=None, sort_keys=False: json.dumps(
        x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)
    hf_conv = json.loads(json.dumps(conv))
    hf_conv[1]["content"] = ""
    hf_conv[1]["tool_calls"][0]["function"]["arguments"] = {"a": 1, "b": 2}
    expected = env.from_string(template).render(messages=hf_conv, tools=TOOLS, add_generation_prompt=True,
                                                bos_token="", eos_token="")
    with Server("--chat-template", QWEN_TEMPLATE, model=model) as s:
        tokens = s.json("POST", "/tokenize", {"messages": conv, "tools": TOOLS})[1]["tokens"]
        text = s.json("POST", "/detokenize", {"tokens": tokens})[1]["prompt"]
        # (detokenize leaves out the special tokens SmolLM2 has for <|im_start|> and <|im_end|>)
        assert text == expected.replace("<|im_start|>", "").replace("<|im_end|>", "")
        status, _, data = s.request("POST", "/v1/chat/completions", {
            "messages": ASK, "tools": TOOLS, "tool_choice": "required", "parallel_tool_calls": False,
            "max_tokens": 80, "temperature": 0}, timeout=300)
        out = json.loads(data)["choices"][0]
        assert out["finish_reason"] == "tool_calls", out
        check_calls(out["message"]["tool_calls"])


def test_openai_client_tools_and_parse(model):
    openai = pytest.importorskip("openai")
    pydantic = pytest.importorskip("pydantic")
    with Server(model=model) as s:
        client = openai.OpenAI(base_url=s.base_url + "/v1", api_key="none")
        name = client.models.list().data[0].id
        r = client.chat.completions.create(model=name, messages=ASK, tools=TOOLS, tool_choice="required",
                                           max_tokens=80, temperature=0)
        assert r.choices[0].finish_reason == "tool_calls"
        check_calls([c.model_dump() for c in r.choices[0].message.tool_calls])

        class City(pydantic.BaseModel):
            name: str = pydantic.Field(max_length=20)
            is_capital: bool

        # The client sends the model's strict JSON Schema and parses the answer into a City.
        parse = getattr(client.chat.completions, "parse", None) or client.beta.chat.completions.parse
        r = parse(model=name, messages=[{"role": "user", "content": "Describe Paris as JSON."}],
                  response_format=City, max_tokens=100, temperature=0)
        assert r.choices[0].finish_reason == "stop"
        assert isinstance(r.choices[0].message.parsed, City)


SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}},
     "required": ["name", "age"], "additionalProperties": False},
    {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
    {"enum": ["red", "green", "blue", 7, None]},
    {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 4},
    {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10},
                                      "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3}},
     "required": ["city"], "additionalProperties": False},
    {"anyOf": [{"type": "integer"}, {"type": "object", "properties": {"x": {"type": "null"}}, "required": ["x"],
                                      "additionalProperties": False}]},
    {"type": "object", "properties": {"a": {"const": 1}, "b": {"type": ["string", "null"], "maxLength": 6}},
     "required": ["a"], "additionalProperties": {"type": "boolean"}},
    {"$defs": {"p": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                     "required": ["x", "y"], "additionalProperties": False}},
     "type": "array", "prefixItems": [{"$ref": "#/$defs/p"}, {"$ref": "#/$defs/p"}], "items": False, "minItems": 2},
    {"type": "string", "minLength": 2, "maxLength": 8},
    {"type": "object", "properties": {"n": {"type": "number"}, "s": {"enum": ["x", "y"]}}, "required": ["s", "n"],
     "additionalProperties": False},
]


def test_sampled_outputs_validate_against_their_schemas(model):
    """200 samples at temperature 1.0 over 10 schemas through the server: every
    output that ends with "stop" validates (Python's jsonschema), every one cut
    by max_tokens is still a prefix the grammar allowed (not checked here: the
    engine's tests do that), and most end."""
    ended = 0
    with Server(model=model) as s:
        for i, schema in enumerate(SCHEMAS):
            status, _, data = s.request("POST", "/v1/chat/completions", {
                "messages": [{"role": "user", "content": "Answer in JSON."}], "max_tokens": 48, "n": 20,
                "temperature": 1.0, "seed": i, "response_format": {"type": "json_schema",
                                                                   "json_schema": {"name": f"s{i}", "schema": schema}}},
                timeout=600)
            assert status == 200, data
            for c in json.loads(data)["choices"]:
                if c["finish_reason"] == "stop":
                    jsonschema.validate(json.loads(c["message"]["content"]), schema)
                    ended += 1
                else:
                    assert c["finish_reason"] == "length", c
    assert ended >= 140, ended  # of 200
