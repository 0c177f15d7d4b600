// The draft-model proposer: a smaller model with the target's vocabulary
// guesses each speculating sequence's next k tokens in k batched forward
// passes of one row per sequence (decode steps, recordable as CUDA graphs).
//
// Its K/V lives in a pool of its own, at the very block slots the target's
// BlockManager gave the sequence: one allocation, one copy-on-write, one
// truncate serve both models. What the draft has not computed yet (a fresh
// prompt, tokens accepted since its last proposal) it catches up on first,
// in chunks without logits.
//
// Each draft is drawn from the draft's own distribution q after the processing
// the target's row of that position gets (temperature, top-k/p, min-p,
// penalties over the history with the drafts before it, the tokens min_tokens
// holds back, and the grammar's mask in its state after those drafts), and q
// is kept for verification. Greedy requests take the draft's argmax and keep
// no q: a pass of greedy rows is sampled by the backend (on a GPU only the ids
// come back); a pass with a sampled request reads its logits back to keep q.
// Drafts the target's mask would refuse are never proposed.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/core/plan_builder.h"
#include "engine/model/model_runner.h"
#include "kvcache/block_manager.h"

namespace minfer {

struct DraftRequest {
    SequenceState* seq = nullptr;           // a decode: every token but the last computed by the target
    const SamplingParams* params = nullptr;
    uint64_t stream = 0;                    // the sample's random stream
    int32_t room = 0;                       // drafts wanted (> 0)
    std::vector<std::vector<float>>* probs = nullptr;  // out: q of each draft (sampled requests)
    // What the target's rows hold back, so that q is processed as p is:
    grammar::Constraint* constraint = nullptr;  // the sequence's grammar or null (left in the state it had)
    std::span<const int32_t> end_ids;           // EOS as the grammar's mask sees it (empty: ignore_eos)
    std::span<const int32_t> held_back;         // stop ids and EOS, which min_tokens holds back
    int32_t min_tokens = 0;                     // while the output is shorter than this
};

class DraftProposer {
public:
    // `limits`: the target's rows, sequences, pool (num_kv_blocks, block_size) and KV type.
    DraftProposer(const Model& draft, const RunnerLimits& limits);

    // Fills each request's seq->draft_tokens (at most room of them) and probs.
    // The slots of the drafts are allocated here (a sequence the pool has no
    // room for gets none); copy-on-write copies are made in the draft's pool
    // and appended to `copies` for the target's, which must make them before its step.
    void propose(std::span<DraftRequest> requests, BlockManager& blocks, std::vector<BlockCopy>& copies);

    const Model& model() const { return runner_.model(); }

private:
    void catch_up(std::span<DraftRequest* const> active);
    // Runs the plan built so far, with the copy-on-write copies still to make first.
    void run();

    std::vector<BlockCopy> pending_copies_;

    ModelRunner runner_;
    PlanBuilder planner_;
};

}  // namespace minfer
