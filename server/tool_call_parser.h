// A model's tool calls, read from the text it wrote: the formats the common
// chat templates teach, parsed whole (a finished response) or as far as they
// have come (a stream, whose deltas must add up to the whole).
//
//   hermes       Hermes, Qwen2.5, Qwen3:  <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
//   llama3_json  Llama 3.1 / 3.2:         {"name": ..., "parameters": {...}}  (several joined by ';')
//   mistral      Mistral:                 [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]
//   json         any other model:         {"name": ..., "arguments": {...}} or a list of them
//
// Arguments are passed on as the model wrote them (a JSON text), so that the
// streamed pieces and the whole agree byte for byte.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace minfer {

enum class ToolCallFormat { Hermes, Llama3Json, Mistral, Json };

// "hermes", "llama3_json", "mistral", "json"; nullopt for another name.
std::optional<ToolCallFormat> tool_call_format_named(std::string_view name);
std::string_view tool_call_format_name(ToolCallFormat f);
// The format a chat template teaches, from the markers in its source.
ToolCallFormat tool_call_format_of_template(std::string_view template_source);

// A call as far as the text has come.
struct ToolCallText {
    std::string name;           // empty until the name is whole
    std::string arguments;      // the arguments' JSON text so far
    bool complete = false;      // the call's object is closed and its arguments are valid JSON
};

struct ToolCallParse {
    std::string content;              // text that is not a call (before the first one)
    std::vector<ToolCallText> calls;  // in order; when not final, the last may be partial
};

// Reads `text`. Final: only whole calls count, and a text without one is all
// content. Not final: `content` is what cannot turn into a call any more (a
// possible start of one is held back), and calls may be partial.
ToolCallParse parse_tool_calls(ToolCallFormat format, std::string_view text, bool final);

// OpenAI's streaming deltas for one choice: content pieces, then for each call
// a first delta {index, id, type, function: {name, arguments: ""}} and
// argument pieces.
class ToolCallStream {
public:
    explicit ToolCallStream(ToolCallFormat format) : format_(format) {}
    struct Delta {
        std::string content;
        boost::json::array tool_calls;  // delta.tool_calls entries
    };
    // The whole text so far; returns what is new since the last call.
    Delta update(std::string_view text, bool final);
    // Calls announced so far (their ids, names and arguments as streamed).
    size_t num_calls() const { return sent_.size(); }

private:
    struct Sent {
        std::string id;
        size_t argument_bytes = 0;
    };
    ToolCallFormat format_;
    size_t content_bytes_ = 0;
    std::vector<Sent> sent_;
};

// An id for a call: "call_" and 24 random letters and digits.
std::string new_tool_call_id();

// The `tool_calls` of a chat message: [{id, type: "function", function: {name, arguments}}].
boost::json::array tool_calls_json(const std::vector<ToolCallText>& calls);

}  // namespace minfer
