// OpenAI completion requests and results as JSON: what `minfer generate`
// reads and writes per line, and what the server's /v1/completions speaks.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/llm_engine.h"
#include "engine/sequence.h"
#include "engine/tokenizer.h"

namespace minfer {

struct CompletionRequest {
    std::vector<int32_t> prompt_ids;
    GenerationOptions options;
};

// A completion request's prompt (`prompt` text or `prompt_token_ids`) and its
// parameters (max_tokens, temperature, top_p, top_k, min_p, seed, stop, n,
// logprobs, echo, logit_bias, presence/frequency/repetition_penalty, plus
// vLLM's ignore_eos, min_tokens, stop_token_ids, priority and OpenAI's user).
// Throws RequestError naming the field that is wrong.
CompletionRequest parse_completion_request(const boost::json::object& body, const Tokenizer& tokenizer);

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
