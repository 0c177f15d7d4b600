// The scheduler: which sequences run in the next step, and how many tokens each.
//
// One rule for every step (vLLM v1's): each sequence has tokens it has
// computed and tokens it wants computed (its prompt, a recompute after
// preemption, or the one new token of a decode). A step hands out at most
// max_num_batched_tokens rows to at most max_num_seqs sequences:
//   1. running sequences, decodes first, then prefill chunks (chunked prefill
//      is always on: a long prompt takes what the budget leaves);
//   2. then waiting sequences are admitted in the policy's order, reusing
//      cached prefix blocks, until a budget or the KV pool runs out.
// When the pool runs out for a running sequence, the running sequence with
// the lowest priority (then the latest arrival) is preempted: its blocks are
// freed and it goes back to waiting, to be recomputed later.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "scheduler/sequence_state.h"
#include "kvcache/block_manager.h"

namespace minfer {

enum class SchedulingPolicy {
    Fcfs,      // first come, first served
    Priority,  // lower `priority` first, then arrival (as vLLM)
    Fair,      // virtual token counters per client (VTC): the least served client first
};

// "fcfs", "priority" or "fair"; throws std::invalid_argument otherwise.
SchedulingPolicy parse_scheduling_policy(const std::string& name);

struct SchedulerConfig {
    int32_t max_num_seqs = 256;
    int32_t max_num_batched_tokens = 2048;
    int32_t max_logits_rows = 256;  // rows of logits the runner holds in one step
    SchedulingPolicy policy = SchedulingPolicy::Fcfs;
};

// What one step may take: rows in all, and rows for one prompt's chunk while
// other prompts compete for the step (so that a long prompt leaves room for the
// ones behind it, as vLLM's long_prefill_token_threshold does).
struct StepBudget {
    int32_t tokens = 0;         // 0: max_num_batched_tokens
    int32_t prefill_chunk = 0;  // 0: no cap
};

struct ScheduledSequence {
    SequenceState* seq;
    int32_t num_tokens;  // rows of this sequence in the step: tokens [num_computed, num_computed + num_tokens)
};

struct SchedulerOutput {
    std::vector<ScheduledSequence> scheduled;  // decodes first
    std::vector<BlockCopy> copies;             // copy-on-write, before the step
    std::vector<SequenceState*> preempted;          // sent back to waiting by this step
    int32_t num_tokens = 0;
    bool empty() const { return scheduled.empty(); }
};

class Scheduler {
public:
    // VTC's weights: a generated token costs twice a prompt token (the VTC paper's default).
    static constexpr double kInputTokenCost = 1.0;
    static constexpr double kOutputTokenCost = 2.0;

    Scheduler(const SchedulerConfig& config, BlockManager& blocks);

    const SchedulerConfig& config() const { return config_; }
    // A new sequence (or one coming back) waits for admission.
    void add_waiting(SequenceState* seq);
    // A sequence forked from a running one runs from the next step on.
    void add_running(SequenceState* seq);
    // Drops a finished or aborted sequence and frees its blocks.
    void remove(SequenceState* seq);

    SchedulerOutput schedule(const StepBudget& budget = {});

    size_t num_waiting() const { return waiting_.size(); }
    size_t num_running() const { return running_.size(); }
    int64_t num_preemptions() const { return num_preemptions_; }
    // The fair policy's virtual token counters.
    const std::map<std::string, double>& client_counters() const { return counters_; }

private:
    bool before(const SequenceState* a, const SequenceState* b) const;  // policy order of waiting sequences
    static bool lower_priority(const SequenceState* a, const SequenceState* b);  // a is preempted before b
    int32_t fit_logits(const SequenceState& seq, int32_t count, int32_t rows_left) const;
    int32_t prefill_cap(const StepBudget& budget) const;
    void preempt(SequenceState* seq, SchedulerOutput& out);
    void charge(SequenceState& seq, int32_t count);
    void client_active(const std::string& client, int delta);

    SchedulerConfig config_;
    BlockManager& blocks_;
    std::vector<SequenceState*> waiting_;
    std::vector<SequenceState*> running_;
    int64_t num_preemptions_ = 0;
    std::map<std::string, double> counters_;       // VTC: service received per client
    std::map<std::string, int> active_;            // sequences waiting or running, per client
};

}  // namespace minfer
