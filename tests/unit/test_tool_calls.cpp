// Tool calling (server/tool_calls.h, server/tool_call_parser.h): the calls
// read from each format, whole and streamed (the deltas add up to the whole
// at every split), the request's fields and their errors, the grammar that
// holds calls to the tools' parameters, and the conversation as templates
// want it.
#include <doctest/doctest.h>

#include <boost/json.hpp>
#include <string>
#include <vector>

#include "engine/core/llm_engine.h"
#include "engine/grammar/earley.h"
#include "server/tool_call_parser.h"
#include "server/tool_calls.h"

using namespace minfer;
namespace json = boost::json;

namespace {

json::object body(std::string_view text) { return json::parse(text).as_object(); }

const char* kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
     "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}, "required": ["city"],
     "additionalProperties": false}}},
  {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
     "properties": {"a": {"type": "integer"}, "b": {"$ref": "#/$defs/n"}}, "required": ["a", "b"],
     "additionalProperties": false, "$defs": {"n": {"type": "integer"}}}}}])";

bool grammar_takes(const GenerationOptions& o, const std::string& text) {
    grammar::Recognizer r(*o.grammar);
    return r.feed(text) && r.accepting();
}

// Streams `text` cut at every byte and checks that the deltas add up to the final parse.
void check_stream_adds_up(ToolCallFormat f, const std::string& text) {
    ToolCallStream stream(f);
    std::string content;
    std::vector<std::string> names, arguments;
    for (size_t i = 1; i <= text.size(); ++i) {
        const ToolCallStream::Delta d = stream.update(std::string_view(text).substr(0, i), i == text.size());
        content += d.content;
        for (const json::value& v : d.tool_calls) {
            const size_t index = v.at("index").to_number<size_t>();
            if (index == names.size()) {
                names.emplace_back(v.at("function").at("name").as_string());
                arguments.emplace_back();
                CHECK(v.at("id").as_string().starts_with("call_"));
            }
            arguments[index] += v.at("function").at("arguments").as_string();
        }
    }
    const ToolCallParse whole = parse_tool_calls(f, text, true);
    CHECK(content == whole.content);
    REQUIRE(names.size() == whole.calls.size());
    for (size_t i = 0; i < names.size(); ++i) {
        CHECK(names[i] == whole.calls[i].name);
        CHECK(arguments[i] == whole.calls[i].arguments);
    }
}

}  // namespace

TEST_CASE("tool calls: each format's calls are read, and a text without one is content") {
    ToolCallParse p = parse_tool_calls(ToolCallFormat::Hermes,
                                       "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
                                       "</tool_call>\n<tool_call>\n{\"arguments\": {}, \"name\": \"now\"}\n</tool_call>",
                                       true);
    CHECK(p.content == "Let me look.\n");
    REQUIRE(p.calls.size() == 2);
    CHECK(p.calls[0].name == "get_weather");
    CHECK(p.calls[0].arguments == "{\"city\": \"Paris\"}");
    CHECK(p.calls[1].name == "now");
    CHECK(p.calls[1].arguments == "{}");

    p = parse_tool_calls(ToolCallFormat::Llama3Json,
                         "{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": [2, \"}\"]}}; {\"name\": \"x\"}", true);
    REQUIRE(p.calls.size() == 2);
    CHECK(p.calls[0].arguments == "{\"a\": 1, \"b\": [2, \"}\"]}");
    CHECK(p.calls[1].arguments == "{}");
    CHECK(p.content.empty());

    p = parse_tool_calls(ToolCallFormat::Mistral, "[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {\"q\": \"\\\"\"}}]", true);
    REQUIRE(p.calls.size() == 1);
    CHECK(p.calls[0].arguments == "{\"q\": \"\\\"\"}");
    p = parse_tool_calls(ToolCallFormat::Json, "[{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": {\"k\": null}}]", true);
    CHECK(p.calls.size() == 2);

    // Not calls: prose, JSON that names no function, a call cut short, arguments that are not JSON.
    for (const char* text : {"Paris is sunny.", "{\"answer\": 42}", "<tool_call>\n{\"name\": \"a\", \"argu",
                             "{\"name\": \"a\", \"arguments\": {\"x\": tru}}"}) {
        for (ToolCallFormat f : {ToolCallFormat::Hermes, ToolCallFormat::Json}) {
            p = parse_tool_calls(f, text, true);
            CHECK(p.calls.empty());
            CHECK(p.content == text);
        }
    }
}

TEST_CASE("tool calls: streamed deltas add up to the whole, and a possible start of a call is held back") {
    check_stream_adds_up(ToolCallFormat::Hermes,
                         "Sure.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"New \\\"York\\\"\", "
                         "\"days\": [1, 2]}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>");
    check_stream_adds_up(ToolCallFormat::Json, "[{\"name\": \"a\", \"arguments\": {\"n\": 12}}, {\"name\": \"b\", \"arguments\": {\"s\": \"]}\"}}]");
    check_stream_adds_up(ToolCallFormat::Llama3Json, "{\"name\": \"a\", \"parameters\": {\"n\": -1.5e3}}");
    check_stream_adds_up(ToolCallFormat::Hermes, "No call here <tool_ca but almost.");
    check_stream_adds_up(ToolCallFormat::Json, "Plain words.");

    ToolCallStream s(ToolCallFormat::Hermes);
    CHECK(s.update("Hi <tool_", false).content == "Hi ");  // "<tool_" may begin a call
    CHECK(s.update("Hi <tool_x", false).content == "<tool_x");
}

TEST_CASE("tool calls: the request's fields, and each mistake named") {
    const std::string tools = kTools;
    ToolRequest r = parse_tool_request(body("{\"tools\": " + tools + "}"));
    CHECK(r.choice == ToolRequest::Choice::Auto);
    CHECK(r.parses());
    r = parse_tool_request(body("{\"tools\": " + tools + ", \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"add\"}}, \"parallel_tool_calls\": false}"));
    CHECK(r.choice == ToolRequest::Choice::Named);
    CHECK(r.named == "add");
    CHECK_FALSE(r.parallel);
    CHECK(parse_tool_request(body("{}")).choice == ToolRequest::Choice::None);
    CHECK_FALSE(parse_tool_request(body("{\"tools\": " + tools + ", \"tool_choice\": \"none\"}")).parses());

    for (const std::string& bad : std::vector<std::string>{
             "{\"tools\": {}}",
             "{\"tools\": [{\"type\": \"function\"}]}",
             "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"bad name\"}}]}",
             "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"a\", \"parameters\": 3}}]}",
             "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"a\"}}, {\"type\": \"function\", \"function\": {\"name\": \"a\"}}]}",
             "{\"tool_choice\": \"required\"}",
             "{\"tools\": " + tools + ", \"tool_choice\": \"sometimes\"}",
             "{\"tools\": " + tools + ", \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"nope\"}}}",
             "{\"tools\": " + tools + ", \"parallel_tool_calls\": 1}"})
        CHECK_THROWS_AS(parse_tool_request(body(bad)), RequestError);
}

TEST_CASE("tool calls: required holds the output to calls whose arguments validate; auto is lazy") {
    const std::string tools = kTools;
    GenerationOptions o;
    constrain_tool_calls(parse_tool_request(body("{\"tools\": " + tools + ", \"tool_choice\": \"required\"}")),
                         ToolCallFormat::Hermes, o);
    REQUIRE(o.grammar);
    CHECK(o.grammar_triggers.empty());
    CHECK(grammar_takes(o, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": \"c\"}}\n</tool_call>"));
    CHECK(grammar_takes(o, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>\n"
                           "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"\"}}\n</tool_call>"));
    CHECK_FALSE(grammar_takes(o, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": \"2\"}}\n</tool_call>"));
    CHECK_FALSE(grammar_takes(o, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"unit\": \"c\"}}\n</tool_call>"));
    CHECK_FALSE(grammar_takes(o, "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>"));
    CHECK_FALSE(grammar_takes(o, "Sure! <tool_call>"));

    GenerationOptions named;
    constrain_tool_calls(parse_tool_request(body("{\"tools\": " + tools + ", \"parallel_tool_calls\": false, "
                                                 "\"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"add\"}}}")),
                         ToolCallFormat::Llama3Json, named);
    CHECK(grammar_takes(named, "{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}"));
    CHECK_FALSE(grammar_takes(named, "{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}; {\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}"));
    CHECK_FALSE(grammar_takes(named, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"x\"}}"));

    GenerationOptions lazy;
    constrain_tool_calls(parse_tool_request(body("{\"tools\": " + tools + "}")), ToolCallFormat::Hermes, lazy);
    REQUIRE(lazy.grammar_triggers.size() == 1);
    CHECK(lazy.grammar_triggers[0].text == "<tool_call>");

    // Parameters that cannot be enforced: a 400 when a call is required, any object under auto.
    const std::string odd = R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"d": {"type": "string", "format": "hostname"}}}}}])";
    GenerationOptions strict;
    CHECK_THROWS_AS(constrain_tool_calls(parse_tool_request(body("{\"tools\": " + odd + ", \"tool_choice\": \"required\"}")),
                                         ToolCallFormat::Json, strict),
                    RequestError);
    GenerationOptions loose;
    constrain_tool_calls(parse_tool_request(body("{\"tools\": " + odd + "}")), ToolCallFormat::Json, loose);
    CHECK(grammar_takes(loose, "{\"name\": \"f\", \"arguments\": {\"anything\": [1]}}"));
}

TEST_CASE("tool calls: compact arguments (disable_any_whitespace) take no whitespace between tokens") {
    const ToolRequest r = parse_tool_request(body(std::string("{\"tools\": ") + kTools + ", \"tool_choice\": \"required\"}"));
    GenerationOptions compact, flexible;
    constrain_tool_calls(r, ToolCallFormat::Json, compact, {.compact = true});
    constrain_tool_calls(r, ToolCallFormat::Json, flexible);
    const std::string tight = "{\"name\":\"add\",\"arguments\":{\"a\":1,\"b\":2}}";
    const std::string spaced = "{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}";
    CHECK(grammar_takes(compact, tight));
    CHECK_FALSE(grammar_takes(compact, spaced));
    CHECK(grammar_takes(flexible, tight));
    CHECK(grammar_takes(flexible, spaced));
    // The same request twice is one compiled grammar (the server's cache).
    GenerationOptions again;
    constrain_tool_calls(r, ToolCallFormat::Json, again, {.compact = true});
    CHECK(again.grammar == compact.grammar);
}

TEST_CASE("tool calls: the conversation as templates read it") {
    const ToolRequest r = parse_tool_request(body(std::string("{\"tools\": ") + kTools + "}"));
    const json::array messages = json::parse(R"([
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
          "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "4 C"}])").as_array();
    json::array m = messages_for_template(messages, r, /*template_knows_tools=*/true);
    REQUIRE(m.size() == 3);
    CHECK(m[1].at("content") == "");
    CHECK(m[1].at("tool_calls").at(0).at("function").at("arguments").at("city") == "Oslo");

    m = messages_for_template(messages, r, /*template_knows_tools=*/false);
    REQUIRE(m.size() == 4);  // a system message describes the tools
    CHECK(m[0].at("role") == "system");
    CHECK(std::string(m[0].at("content").as_string()).find("get_weather") != std::string::npos);
    CHECK(m[2].at("content") == R"({"name":"get_weather","arguments":{"city":"Oslo"}})");

    json::array bad = json::parse(R"([{"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "f", "arguments": "{oops"}}]}])").as_array();
    CHECK_THROWS_AS(messages_for_template(bad, r, true), RequestError);
}
