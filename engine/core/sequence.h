// Sequence: one stream of tokens the engine is generating (a request with
// n > 1 parallel samples has n of them), and the request options they share.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/sampling.h"
#include "engine/text/tokenizer.h"
#include "scheduler/sequence_state.h"

namespace minfer {

// What a caller asks of one request: OpenAI completion parameters plus vLLM's.
struct GenerationOptions {
    SamplingParams sampling;          // sampling.seed is used when has_seed
    bool has_seed = false;            // without a seed, the engine draws one
    int32_t n = 1;                    // parallel samples of the same prompt
    int32_t max_tokens = 16;          // new tokens per sample (< 0: up to the context)
    int32_t min_tokens = 0;           // EOS and stop ids are held back until this many
    std::vector<std::string> stop;    // stop strings: the text ends before them
    std::vector<int32_t> stop_token_ids;
    bool ignore_eos = false;
    int32_t logprobs = -1;            // < 0: none; k >= 0: the sampled token's and the top k
    bool echo = false;                // with logprobs: the prompt's tokens and logprobs too
    std::string client;               // the fairness policy's client (OpenAI's `user`)
    int32_t priority = 0;             // lower is served first (priority policy)
};

// The log-probability of one generated (or prompt) token and the top ones.
struct TokenLogprob {
    int32_t token = 0;
    float logprob = 0.0f;
    std::vector<std::pair<int32_t, float>> top;  // best first
};

// log_softmax of one row of raw logits (in double): the token's logprob and the top k (llm_engine.cpp).
TokenLogprob logprob_of(const float* logits, int32_t vocab, int32_t token, int32_t k);

struct Sequence;

// A request: its prompt, options and samples. The engine owns it.
struct Request {
    uint64_t id = 0;
    std::vector<int32_t> prompt;
    GenerationOptions options;
    int64_t arrival = 0;       // arrival order: ties of every policy go to the earlier request
    double arrival_time = 0;   // seconds, steady clock
    double first_scheduled_time = -1;  // when a step first took it (queue time = this - arrival_time)
    bool queue_time_sent = false;
    std::vector<std::unique_ptr<Sequence>> seqs;  // sample 0 first; the others fork from it after the prompt
    std::vector<TokenLogprob> prompt_logprobs;    // of prompt tokens 1.. (echo with logprobs)
    size_t prompt_logprobs_sent = 0;
    bool aborted = false;

    bool wants_prompt_logprobs() const { return options.echo && options.logprobs >= 0; }
    // The longest stop string: text that could be its start is held back from the caller.
    size_t longest_stop() const {
        size_t n = 0;
        for (const std::string& s : options.stop) n = std::max(n, s.size());
        return n;
    }
};

// One stream of tokens: the scheduler's view (tokens, blocks, queue order)
// plus the request it belongs to and what its caller has been told.
struct Sequence : SequenceState {
    Request* request = nullptr;

    // Output state: text is produced incrementally; stop strings are searched
    // in it, and up to (longest stop string - 1) characters are held back.
    std::unique_ptr<IncrementalDetokenizer> detokenizer;
    std::string text;                // the whole generated text so far (stop string excluded)
    size_t text_sent = 0;            // characters of `text` already handed to the caller
    std::vector<TokenLogprob> logprobs;
    size_t tokens_sent = 0;          // generated tokens already handed to the caller
    size_t logprobs_sent = 0;
    std::optional<std::string> finish_reason;  // "stop", "length" or "abort"
    std::string stop_string;         // the stop string that ended it, if one did
    int32_t stop_token = -1;         // or the stop token id
    bool finish_sent = false;

    // Whether the logits of the row at position p give a prompt token's logprob
    // still missing (that of token p + 1; only sample 0 computes them).
    bool wants_prompt_logprob_row(int32_t p) const {
        return sample_index == 0 && request->wants_prompt_logprobs() && p < num_prompt_tokens - 1 &&
               p >= static_cast<int32_t>(request->prompt_logprobs.size());
    }
    bool prompt_logprobs_pending() const {
        return wants_prompt_logprob_row(static_cast<int32_t>(request->prompt_logprobs.size()));
    }
    // The n - 1 other samples are forked from sample 0 when its prompt is done.
    bool forks_on_first_sample() const { return sample_index == 0 && num_output() == 0 && request->options.n > 1; }

    // The scheduler's questions (scheduler/sequence_state.h).
    int32_t logits_rows(int32_t count) const override;
    int32_t slots() const override { return forks_on_first_sample() ? request->options.n : 1; }
    bool may_reuse_cached_prefix() const override { return !prompt_logprobs_pending(); }
};

// The engine hands the scheduler only its own Sequences.
inline Sequence& as_sequence(SequenceState& s) { return static_cast<Sequence&>(s); }
inline const Sequence& as_sequence(const SequenceState& s) { return static_cast<const Sequence&>(s); }

// Rows of logits a step computing `count` more tokens of `seq` needs: one per
// sample drawn when the step reaches the last token (n for a first sample that
// forks), plus one per prompt row whose next token's logprob is still wanted.
inline int32_t Sequence::logits_rows(int32_t count) const {
    int32_t rows = 0;
    if (num_computed + count == num_tokens()) rows += slots();
    if (sample_index == 0 && request->wants_prompt_logprobs()) {
        // The positions p in [num_computed, num_computed + count) with wants_prompt_logprob_row(p), counted at once.
        const int32_t first = std::max(num_computed, static_cast<int32_t>(request->prompt_logprobs.size()));
        const int32_t last = std::min(num_computed + count, num_prompt_tokens - 1);
        rows += std::max(0, last - first);
    }
    return rows;
}

}  // namespace minfer
