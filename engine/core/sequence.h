// Requests and sequences. A request with n parallel samples has n sequences;
// each is the scheduler's SequenceState (tokens, blocks, queue order) plus
// the request it belongs to and its OutputState (text, logprobs, what the
// caller has been told). The pipeline that moves them (llm_engine.h):
// Scheduler -> PlanBuilder -> ModelRunner -> OutputProcessor.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/sampling.h"
#include "engine/grammar/constraint.h"
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
    // A grammar the generated text must follow (engine/grammar): only tokens
    // it allows are sampled, end-of-sequence only where the text is whole, and
    // the sequence ends when nothing can follow.
    std::shared_ptr<const grammar::Grammar> grammar;
    // With triggers the grammar is lazy: the text is free until one comes
    // (tool_choice "auto": a tool call is constrained once the model starts one).
    std::vector<grammar::GrammarTrigger> grammar_triggers;
    // Disaggregation (engine/core/parked_kv.h). A prefill instance parks the
    // prompt's KV blocks under kv_send_id when the request ends (for the KV
    // sender to ship); a decode instance starts the request from the blocks
    // received under kv_receive_id, computing only the prompt's last token.
    std::string kv_send_id;
    std::string kv_receive_id;
};

// The log-probability of one generated (or prompt) token and the top ones.
struct TokenLogprob {
    int32_t token = 0;
    float logprob = 0.0f;
    std::vector<std::pair<int32_t, float>> top;  // best first
};

// log_softmax of one row of raw logits (in double): the token's logprob and the top k.
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
    std::shared_ptr<const grammar::TokenVocabulary> vocabulary;  // with options.grammar: the engine's
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

// What one sample has produced for its caller. Text is produced incrementally;
// stop strings are searched in it, and up to (longest stop string - 1)
// characters are held back until they cannot start one.
struct OutputState {
    std::unique_ptr<IncrementalDetokenizer> detokenizer;
    std::string text;                // the whole generated text so far (stop string excluded)
    std::vector<TokenLogprob> logprobs;
    std::optional<std::string> finish_reason;  // "stop", "length" or "abort"
    std::string stop_string;         // the stop string that ended it, if one did
    int32_t stop_token = -1;         // or the stop token id
    // Already handed to the caller:
    size_t text_sent = 0;            // characters of `text`
    size_t tokens_sent = 0;          // generated tokens
    size_t logprobs_sent = 0;
    bool finish_sent = false;
};

// One stream of tokens: the scheduler's view, its request, its output.
struct Sequence : SequenceState {
    Request* request = nullptr;
    OutputState out;
    std::unique_ptr<grammar::Constraint> constraint;  // with a grammar: its state after this sample's tokens
    // A draft model's distribution q for each of draft_tokens (sampled requests;
    // greedy ones need none). When the scheduler trims drafts to the step's
    // budget the extra q stay until verification clears them: rows read only
    // the q of a draft they verify.
    std::vector<std::vector<float>> draft_probs;

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

// A new sequence of `request`: sample `sample_index`, holding the prompt, with
// the request's queue order and a detokenizer that starts after the prompt.
std::unique_ptr<Sequence> make_sequence(Request& request, int32_t sample_index, int64_t id,
                                        const Tokenizer& tokenizer);

// The engine hands the scheduler only its own Sequences.
inline Sequence& as_sequence(SequenceState& s) { return static_cast<Sequence&>(s); }
inline const Sequence& as_sequence(const SequenceState& s) { return static_cast<const Sequence&>(s); }

}  // namespace minfer
