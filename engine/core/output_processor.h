// OutputProcessor: what a step's sampled tokens do to their sequences.
//
// After the runner: prompt logprobs are recorded, a fresh prompt with n > 1
// forks its n - 1 siblings (sharing its blocks), each sampled token is
// appended (logprobs, incremental text, stop ids and strings, min_tokens,
// max_tokens, the context's end), and finished sequences leave the scheduler.
// collect() then hands each request that moved its news since the last time.
//
// A speculating sequence keeps the drafts its rows returned unchanged and the
// token of the first row that did not (or of the row after the last draft):
// each is appended as if sampled alone, so stop strings, stop ids, max_tokens
// and the grammar end the run where they would have ended plain decoding. The
// K/V of the rejected drafts' rows is dropped (BlockManager::truncate); only
// kept tokens join the prefix cache.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/core/plan_builder.h"
#include "engine/core/parked_kv.h"
#include "engine/core/sequence.h"
#include "engine/spec/spec_stats.h"
#include "engine/text/tokenizer.h"
#include "kvcache/block_manager.h"
#include "scheduler/scheduler.h"

namespace minfer {

// What one sample produced since the last output.
struct SampleOutput {
    int32_t index = 0;
    std::vector<int32_t> token_ids;
    std::string text;
    std::vector<TokenLogprob> logprobs;
    std::optional<std::string> finish_reason;  // set once, in its last output
    std::string stop_string;                   // the stop string that ended it
    int32_t stop_token = -1;                   // or the stop token id
};

struct RequestOutput {
    uint64_t request_id = 0;
    int32_t num_prompt_tokens = 0;
    std::vector<SampleOutput> samples;          // only the samples that moved
    std::vector<TokenLogprob> prompt_logprobs;  // new ones, of prompt tokens 1.. (echo)
    bool finished = false;                      // every sample finished; the request is gone
    double queue_seconds = -1;                  // in its first output after it was first scheduled
};

using RequestMap = std::unordered_map<uint64_t, std::unique_ptr<Request>>;

class OutputProcessor {
public:
    struct Limits {
        int32_t vocab_size = 0;
        int32_t max_model_len = 0;
    };
    // next_sequence_id: the engine's counter, which forks draw from.
    // parked, park_seconds: where a finished request with a kv_send_id leaves
    // its prompt's blocks for the KV sender, and for how long at most.
    OutputProcessor(const Tokenizer& tokenizer, Scheduler& scheduler, BlockManager& blocks,
                    std::vector<int32_t> eos_ids, Limits limits, int64_t& next_sequence_id, ParkedKVTable& parked,
                    double park_seconds);

    // A step is done: `sampled` has one id per sample of `in`, `logits` the raw
    // logits of every use when in.needs_logits.
    void process(const StepInputs& in, std::span<const int32_t> sampled, std::span<const float> logits);
    // Ends a sequence ("stop", "length", "abort"): it leaves the scheduler, its
    // blocks go back (or, for a prefill instance's request, are parked).
    void finish(Sequence& seq, const std::string& reason);
    // `r` has news for its caller at the next collect().
    void moved(Request& r);
    // The news of every request that moved; finished requests leave `requests`.
    std::vector<RequestOutput> collect(RequestMap& requests);

    int64_t generation_tokens() const { return generation_tokens_; }
    const SpecDecodeStats& spec_stats() const { return spec_stats_; }

private:
    void append_token(Sequence& seq, int32_t token, const float* logits);
    // The rows of a speculating sequence, from use `first` on: the accepted drafts and one more token.
    void append_verified(Sequence& seq, std::span<const int32_t> sampled, size_t first,
                         const std::function<const float*(size_t)>& logits_of);
    Sequence& fork(Sequence& first, int32_t sample_index);
    void park_prompt(Sequence& seq);
    RequestOutput news_of(Request& r);

    const Tokenizer& tokenizer_;
    Scheduler& scheduler_;
    BlockManager& blocks_;
    std::vector<int32_t> eos_ids_;
    Limits limits_;
    int64_t& next_sequence_id_;
    ParkedKVTable& parked_;
    double park_seconds_;
    std::vector<Request*> moved_;
    int64_t generation_tokens_ = 0;
    SpecDecodeStats spec_stats_;
};

}  // namespace minfer
