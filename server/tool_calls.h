// Tool calling in chat requests: what the request offers (tools,
// tool_choice, parallel_tool_calls), the conversation as chat templates
// expect it, and the grammar that makes the model's calls well formed.
//
// With tool_choice "required" or a named function, the output is constrained
// from its first token to calls whose arguments validate against the tool's
// `parameters`; with "auto" the model may answer in prose, and a call is
// constrained from the moment it starts one (a lazy grammar, triggered by the
// format's opening: "<tool_call>", or "{" / "[" at the start of the text).
#pragma once

#include <boost/json.hpp>
#include <string>

#include "engine/core/sequence.h"
#include "engine/grammar/json_schema.h"
#include "server/tool_call_parser.h"

namespace minfer {

struct ToolRequest {
    enum class Choice { None, Auto, Required, Named };
    boost::json::array tools;  // [{type: "function", function: {name, description?, parameters?}}]
    Choice choice = Choice::None;
    std::string named;         // Choice::Named: the function's name
    bool parallel = true;      // parallel_tool_calls: more than one call in a response

    // The model's output is read for calls.
    bool parses() const { return !tools.empty() && choice != Choice::None; }
};

// A chat request's tools, tool_choice (OpenAI's default: "auto" with tools,
// "none" without) and parallel_tool_calls. Throws RequestError naming the field.
ToolRequest parse_tool_request(const boost::json::object& body);

// Sets options.grammar (and, for "auto", options.grammar_triggers) to the
// calls `tools` allows, written in `format`. A tool whose parameters cannot
// be enforced exactly is a RequestError for "required" and a named function;
// under "auto" its arguments are held to any JSON object. `json` applies to
// the arguments as to any JSON constraint (compact: no whitespace between
// tokens). The grammar comes from the server's cache (compiled_grammars()).
void constrain_tool_calls(const ToolRequest& tools, ToolCallFormat format, GenerationOptions& options,
                          const grammar::JsonSchemaOptions& json = {});

// The conversation as templates expect it: an assistant message's null
// content is "", and its tool_calls' arguments are JSON objects rather than
// strings (as transformers' templates read them; vLLM does the same). For a
// template that knows nothing of tools (no `tools` in its source) the tools
// are described in the system message, and earlier calls are written into
// their message's content as the JSON the model is asked to write.
boost::json::array messages_for_template(boost::json::array messages, const ToolRequest& tools,
                                         bool template_knows_tools);

}  // namespace minfer
