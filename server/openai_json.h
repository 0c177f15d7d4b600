// The OpenAI response bodies: errors, completion and chat completion objects,
// and their streamed chunks (`data: {...}` SSE events).
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/completion_json.h"
#include "server/tool_call_parser.h"
#include "server/http/http_server.h"

namespace minfer {

// {"error": {"message", "type", "param", "code"}} with the status.
HttpResponse error_response(http::status status, const std::string& message, unsigned version,
                            const char* type = nullptr);
HttpResponse json_response(const boost::json::value& body, unsigned version, http::status status = http::status::ok);

// Builds one request's response from the engine's outputs of its prompts.
// Choice i * n + k is sample k of prompt i.
class ResponseBuilder {
public:
    ResponseBuilder(const Tokenizer& tokenizer, bool chat, std::string id, int64_t created, std::string model,
                    const GenerationOptions& options, const std::vector<std::vector<int32_t>>& prompts);

    // Folds an output into the choices; for streaming, also the SSE events it makes.
    void accumulate(size_t prompt_index, const RequestOutput& out);
    std::vector<std::string> stream_chunks(size_t prompt_index, const RequestOutput& out);
    std::string usage_chunk() const;
    boost::json::object response() const;
    std::string finish_reason(size_t prompt_index) const;  // of its first sample
    // Chat: read the outputs for tool calls written in `format` (message.tool_calls,
    // streamed as tool-call deltas, finish_reason "tool_calls").
    void read_tool_calls(ToolCallFormat format);

private:
    boost::json::object chunk_envelope() const;
    boost::json::object usage() const;
    boost::json::value chat_logprobs(const std::vector<int32_t>& ids, const std::vector<TokenLogprob>& lps) const;
    size_t choice_index(size_t prompt_index, int32_t sample) const { return prompt_index * size_t(options_.n) + size_t(sample); }

    const Tokenizer& tokenizer_;
    bool chat_;
    std::string id_;
    int64_t created_;
    std::string model_;
    GenerationOptions options_;
    const std::vector<std::vector<int32_t>>& prompts_;
    std::vector<std::vector<CompletionChoice>> choices_;        // per prompt
    std::vector<std::vector<TokenLogprob>> prompt_logprobs_;    // per prompt (echo)
    std::vector<bool> started_;                                 // per choice index: first chunk sent
    std::optional<ToolCallFormat> tool_format_;
    std::vector<ToolCallStream> tool_streams_;                  // per choice index, with tool_format_
};

}  // namespace minfer
