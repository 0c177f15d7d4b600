// What the scheduler knows of a sequence: its tokens and where they stand in
// the KV cache, its place in the queue, and how many rows of logits a step over
// it needs. No text, no tokenizer, no request options: the engine's Sequence
// (engine/core/sequence.h) extends it with those, and answers the three
// questions at the bottom with its own rules (samples, forks, prompt logprobs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvcache/block_manager.h"

namespace minfer {

enum class SequenceStatus { Waiting, Running, Finished };

struct SequenceState {
    virtual ~SequenceState() = default;

    int64_t id = 0;
    std::vector<int32_t> tokens;     // the prompt, then the generated tokens (prefix-cache hashes read them)
    int32_t num_prompt_tokens = 0;
    int32_t num_computed = 0;        // leading tokens whose K/V are in the cache
    // Empty while waiting, unless the sequence arrives with its K/V (a decode
    // instance's received blocks): then admission starts from them.
    BlockList blocks;
    SequenceStatus status = SequenceStatus::Waiting;
    int32_t num_preemptions = 0;
    int32_t num_charged = 0;         // tokens the fair policy has charged (a recompute is not charged twice)
    // Speculative decoding: tokens a proposer guessed to follow `tokens`. A step
    // computes them after the last token, and keeps those the target accepts.
    // Only a decode has them; the scheduler trims them to the step's budget,
    // and preemption drops them.
    std::vector<int32_t> draft_tokens;
    // A draft model's K/V (in its own pool, at the same block slots) covers
    // tokens [0, draft_computed); the draft proposer catches up from there.
    int32_t draft_computed = 0;

    // Queue order: the policies compare these.
    int64_t arrival = 0;             // the request's arrival order; ties of every policy go to the earlier
    int32_t sample_index = 0;        // which of the request's samples (ties within a request)
    int32_t priority = 0;            // lower is served first (priority policy)
    std::string client;              // the fair policy's client

    int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
    int32_t num_output() const { return num_tokens() - num_prompt_tokens; }
    // Tokens still to compute before the next sample: the unprefilled prompt, a
    // recompute after preemption, or the one new decode token.
    int32_t num_uncomputed() const { return num_tokens() - num_computed; }
    // Rows the sequence would take in a step: the uncomputed tokens and the drafts.
    int32_t num_wanted() const { return num_uncomputed() + static_cast<int32_t>(draft_tokens.size()); }
    bool finished() const { return status == SequenceStatus::Finished; }

    // Rows of logits a step computing `count` more rows needs. By default one
    // when the step reaches the last token (the next token is sampled there),
    // and one per draft (each is verified against the target's own choice).
    virtual int32_t logits_rows(int32_t count) const {
        return num_computed + count >= num_tokens() ? 1 + (num_computed + count - num_tokens()) : 0;
    }
    // Sequence slots (of max_num_seqs) it holds: more than one for a sequence
    // that will fork into several.
    virtual int32_t slots() const { return 1; }
    // Whether admission may start it from cached prefix blocks (false when the
    // rows of its prompt must be computed anyway, for their logits).
    virtual bool may_reuse_cached_prefix() const { return true; }
};

}  // namespace minfer
