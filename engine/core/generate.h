// Generation of one sequence: what `minfer run` does. The prompt is prefilled
// in chunks of at most max_num_batched_tokens rows, then one decode row per
// step, each step's plan made by PlanBuilder over blocks of a BlockManager.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/core/draft_proposer.h"
#include "engine/grammar/constraint.h"
#include "engine/model/model_runner.h"
#include "engine/spec/spec_config.h"
#include "engine/spec/spec_stats.h"
#include "kernels/sampling.h"
#include "engine/text/tokenizer.h"
#include "kvcache/block_manager.h"

namespace minfer {

struct GenerateOptions {
    int32_t max_new_tokens = 256;
    SamplingParams sampling;
    std::vector<int32_t> stop_ids;  // generation ends after sampling one of these (it is kept)
    // A grammar state the text must follow (make_constraint); stop ids are
    // allowed only where the text is a whole sentence, and generation ends
    // when nothing can follow.
    grammar::Constraint* constraint = nullptr;
    // Speculation: each decode step verifies up to k guessed tokens (the
    // runner must hold 1 + k rows of logits), from n-gram lookup or, with
    // method Draft, from `drafter` (over the same BlockManager). Greedy output
    // is the same token for token; sampled output has the same distribution.
    SpeculativeConfig speculative;
    DraftProposer* drafter = nullptr;
};

struct GenerateResult {
    std::vector<int32_t> generated_ids;
    std::string finish_reason;  // "stop" (a stop id) or "length" (max_new_tokens or the context)
    double prefill_seconds = 0;
    double decode_seconds = 0;
    SpecDecodeStats spec;  // with speculation
};

// Generates after `prompt_ids` (which must be non-empty and fit the context).
// on_token, if set, sees each id as it is sampled.
// `blocks` must hold the runner's KV pool's blocks (the sequence's go back at the end).
GenerateResult generate(ModelRunner& runner, BlockManager& blocks, int32_t context_len,
                        const std::vector<int32_t>& prompt_ids, const GenerateOptions& options,
                        const std::function<void(int32_t)>& on_token = {});

// The tokenizer's vocabulary as grammars see it: each token's bytes (control
// and unused tokens none).
std::shared_ptr<const grammar::TokenVocabulary> token_vocabulary(const Tokenizer& tokenizer);

// Ids that end a generation by default: the tokenizer's end-of-generation ids
// and BOS, which a base model samples to begin a new document (llama2.c's rule).
std::vector<int32_t> default_stop_ids(const Tokenizer& tokenizer);

}  // namespace minfer
