// OpenAI completion requests and results as JSON: what `minfer generate`
// reads and writes per line, and what the server's /v1/completions speaks.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/llm_engine.h"
#include "engine/core/sequence.h"
#include "engine/grammar/grammar_cache.h"
#include "engine/grammar/json_schema.h"
#include "engine/text/tokenizer.h"

namespace minfer {

struct CompletionRequest {
    // One prompt, or several (OpenAI's batch form: a list of strings or of
    // token-id lists); each is its own engine request, its choices numbered
    // prompt_index * n + sample.
    std::vector<std::vector<int32_t>> prompts;
    GenerationOptions options;
    std::vector<std::string> ignored_fields;  // unknown fields, for the server's log
};

// A completion request's prompt (`prompt`: text, a list of texts, token ids or
// lists of them; or vLLM's `prompt_token_ids`) and its parameters (below).
// Throws RequestError naming the field that is wrong.
// json_compact: JSON constraints without whitespace unless the request's
// structured_outputs.disable_any_whitespace says otherwise (`minfer generate --json-compact`).
CompletionRequest parse_completion_request(const boost::json::object& body, const Tokenizer& tokenizer,
                                           bool json_compact = false);

// The generation parameters completions and chat share: max_tokens /
// max_completion_tokens, temperature, top_p, top_k, min_p, seed, stop, n,
// logprobs (chat: true/false with top_logprobs), echo (completions),
// logit_bias, presence/frequency/repetition_penalty, vLLM's ignore_eos,
// min_tokens, stop_token_ids, priority, and OpenAI's user. Fields we know but
// do not support (suffix, best_of, functions, ...) and chat's tools are a RequestError; unknown
// ones are listed in *ignored. `skip` names the fields the caller reads itself.
// A JSON constraint (guided_json, json_schema, response_format,
// structured_outputs.json) has no whitespace between tokens when
// structured_outputs.disable_any_whitespace is true (vLLM's), or when it is
// absent and json_compact is.
GenerationOptions parse_generation_options(const boost::json::object& body, bool chat,
                                           std::initializer_list<std::string_view> skip,
                                           std::vector<std::string>* ignored, bool json_compact = false);

// Every request's compiled grammars, by kind and source (grammar_cache.h):
// gbnf, regex, choice, schema, json_object and tool calls.
grammar::GrammarCache& compiled_grammars();
// A JSON Schema's grammar through that cache; throws grammar::GrammarError.
std::shared_ptr<const grammar::Grammar> schema_grammar(const boost::json::value& schema,
                                                       const grammar::JsonSchemaOptions& options);

// vLLM's structured_outputs.disable_any_whitespace: JSON (schemas, json_object
// and tool-call arguments) without whitespace between tokens, whichever field
// asks for it; compact_by_default when the body does not say.
grammar::JsonSchemaOptions json_options(const boost::json::object& body, bool compact_by_default);

// One sample's accumulated result.
struct CompletionChoice {
    int32_t index = 0;
    std::vector<int32_t> token_ids;
    std::string text;
    std::vector<TokenLogprob> logprobs;
    std::string finish_reason;
    std::string stop_string;
    int32_t stop_token = -1;
};

// Folds a step's outputs into per-sample results (choices sorted by index).
void accumulate(std::vector<CompletionChoice>& choices, std::vector<TokenLogprob>& prompt_logprobs,
                const RequestOutput& out);

// OpenAI's legacy completion `logprobs` object: tokens, token_logprobs,
// top_logprobs and text_offset; with echo, the prompt's tokens come first
// (the first one has a null logprob).
boost::json::object completion_logprobs_json(const Tokenizer& tokenizer, const CompletionChoice& choice,
                                             const std::vector<int32_t>* echo_prompt,
                                             const std::vector<TokenLogprob>& prompt_logprobs);

}  // namespace minfer
