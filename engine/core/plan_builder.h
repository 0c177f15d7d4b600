// PlanBuilder: the one place that turns sequences into a step's inputs.
//
// The engine hands it the scheduler's output and gets back a StepInputs: the
// flat StepPlan the runner runs, what each row of logits is for, and one
// SamplingRow per token to draw. `minfer run`, perplexity and bench latency
// use its lower half (add_rows / add_logits_row / finish) over the same
// BlockManager the engine uses.
//
// A speculating sequence (k draft tokens) takes 1 + k rows, each a sampling
// row: row i is processed with the history and grammar state the sequence
// would have after drafts 0..i-1, and verifies draft i (the last, none: it
// draws the token after a fully accepted run). A grammar's masks come from
// fill_masks (a batch's on MaskWorkers' threads); the OutputProcessor
// advances the constraint with the tokens it keeps.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/core/mask_workers.h"
#include "engine/core/sequence.h"
#include "kernels/sampling.h"
#include "kernels/step_plan.h"
#include "scheduler/scheduler.h"

namespace minfer {

// The grammar masks of a speculating sequence's rows: masks[0] in the
// constraint's state now, masks[i] after drafts [0, i). A draft the grammar
// refuses (or an end id) is never accepted (its row gives it no probability),
// so the rows after it only repeat the last mask. The constraint is left as it was.
void fill_draft_masks(grammar::Constraint& constraint, std::span<const int32_t> drafts,
                      std::span<const int32_t> end_ids, std::span<std::vector<uint32_t>> masks);

// What one row of the step's logits is for.
struct LogitsUse {
    Sequence* seq = nullptr;
    int32_t sample_stream = -1;    // >= 0: draw the next token of sample `sample_stream`
    int32_t prompt_position = -1;  // >= 0: logprob of prompt token prompt_position + 1
    int32_t spec_row = 0;          // a sample's row in its sequence's run: draws the token after drafts [0, spec_row)
};

struct StepInputs {
    StepPlan plan;
    // One per plan.logits_rows entry: the samples to draw first, then the rows
    // of prompt logprobs.
    std::vector<LogitsUse> uses;
    size_t num_samples = 0;
    std::vector<SamplingRow> sampling_rows;        // one per sample, in the order of uses
    std::vector<std::vector<int32_t>> suppressed;  // ids each sampling row may not draw (it points here)
    std::vector<std::vector<uint32_t>> masks;      // the grammar masks of the rows that have one (ditto)
    std::vector<std::vector<int32_t>> histories;   // a speculating sequence's tokens and drafts, at its first row (ditto)
    // Logprobs are of the model's raw distribution: the logits are read before
    // sampling processes them.
    bool needs_logits = false;
};

class PlanBuilder {
public:
    // eos_ids: what min_tokens holds back (with the request's stop ids).
    PlanBuilder(int32_t block_size, std::vector<int32_t> eos_ids = {});
    // The ids min_tokens holds back for a request: its stop ids and, unless
    // ignore_eos, EOS (the target's rows here; a draft model's rows alike).
    std::vector<int32_t> held_back(const GenerationOptions& o) const;
    // EOS as a grammar's mask allows it at a whole sentence (none under ignore_eos).
    std::span<const int32_t> end_ids(const GenerationOptions& o) const {
        return o.ignore_eos ? std::span<const int32_t>{} : std::span<const int32_t>(eos_ids_);
    }

    // The whole step of the engine: every scheduled sequence's rows back to
    // back, a logits row per sample to draw and per prompt logprob wanted.
    // The sampling rows' grammar masks are left to fill_masks.
    StepInputs build(const SchedulerOutput& scheduled);
    // Each constrained sample's allowed tokens, the sequences' masks computed
    // on the mask workers. The engine calls it after launching the forward
    // pass: on a GPU the kernels run while the CPU walks the grammars, and
    // the masks are needed only by sampling.
    void fill_masks(StepInputs& in);

    // ---- one plan, a sequence at a time ----------------------------------------
    // Appends rows [seq.num_computed, seq.num_computed + count) of `seq`, whose
    // blocks must already hold them; returns the index of the first row.
    int32_t add_rows(const SequenceState& seq, int32_t count) { return add_rows(seq, seq.num_computed, count); }
    // The same from row `first` (a draft model catching up on tokens the target computed).
    int32_t add_rows(const SequenceState& seq, int32_t first, int32_t count);
    // Asks for the logits of row `row` (rows may repeat: n samples of one row).
    void add_logits_row(int32_t row) { plan_.logits_rows.push_back(row); }
    void add_block_copies(std::span<const BlockCopy> copies);
    // The plan so far, block tables padded to the longest; the builder starts over.
    StepPlan finish();

private:
    int32_t block_size_;
    std::vector<int32_t> eos_ids_;
    std::unique_ptr<MaskWorkers> workers_;  // made when a step first has two masks to compute
    StepPlan plan_;
    std::vector<const std::vector<int32_t>*> tables_;  // each added sequence's block ids
};

}  // namespace minfer
