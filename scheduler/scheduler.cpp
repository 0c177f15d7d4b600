#include "scheduler/scheduler.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace minfer {

SchedulingPolicy parse_scheduling_policy(const std::string& name) {
    if (name == "fcfs") return SchedulingPolicy::Fcfs;
    if (name == "priority") return SchedulingPolicy::Priority;
    if (name == "fair") return SchedulingPolicy::Fair;
    throw std::invalid_argument("unknown scheduling policy '" + name + "' (fcfs, priority or fair)");
}

Scheduler::Scheduler(const SchedulerConfig& config, BlockManager& blocks) : config_(config), blocks_(blocks) {
    if (config_.max_num_seqs <= 0 || config_.max_num_batched_tokens <= 0 || config_.max_logits_rows <= 0)
        throw std::invalid_argument("scheduler limits must be positive");
}

void Scheduler::client_active(const std::string& client, int delta) {
    int& n = active_[client];
    if (n == 0 && delta > 0 && config_.policy == SchedulingPolicy::Fair) {
        // VTC: a client that comes back is lifted to the least-served active
        // client, so that idling earns it no credit to starve the others with.
        double floor = std::numeric_limits<double>::infinity();
        for (const auto& [other, count] : active_)
            if (count > 0) floor = std::min(floor, counters_[other]);
        double& c = counters_[client];
        if (floor != std::numeric_limits<double>::infinity()) c = std::max(c, floor);
    }
    n += delta;
}

void Scheduler::add_waiting(SequenceState* seq) {
    seq->status = SequenceStatus::Waiting;
    waiting_.push_back(seq);
    client_active(seq->client, +1);
}

void Scheduler::add_running(SequenceState* seq) {
    seq->status = SequenceStatus::Running;
    running_.push_back(seq);
    client_active(seq->client, +1);
}

void Scheduler::remove(SequenceState* seq) {
    auto drop = [&](std::vector<SequenceState*>& list) {
        auto it = std::find(list.begin(), list.end(), seq);
        if (it == list.end()) return false;
        list.erase(it);
        return true;
    };
    if (drop(running_) || drop(waiting_)) client_active(seq->client, -1);
    blocks_.free(seq->blocks);
}

bool Scheduler::before(const SequenceState* a, const SequenceState* b) const {
    if (config_.policy == SchedulingPolicy::Priority && a->priority != b->priority) return a->priority < b->priority;
    if (config_.policy == SchedulingPolicy::Fair) {
        const double ca = counters_.at(a->client), cb = counters_.at(b->client);
        if (ca != cb) return ca < cb;
    }
    if (a->arrival != b->arrival) return a->arrival < b->arrival;
    return a->sample_index < b->sample_index;
}

bool Scheduler::lower_priority(const SequenceState* a, const SequenceState* b) {
    if (a->priority != b->priority) return a->priority > b->priority;
    if (a->arrival != b->arrival) return a->arrival > b->arrival;
    return a->sample_index > b->sample_index;
}

// The largest count <= `count` whose logits rows fit in rows_left (0 if none).
int32_t Scheduler::fit_logits(const SequenceState& seq, int32_t count, int32_t rows_left) const {
    while (count > 0 && seq.logits_rows(count) > rows_left) --count;
    return count;
}

void Scheduler::preempt(SequenceState* seq, SchedulerOutput& out) {
    running_.erase(std::find(running_.begin(), running_.end(), seq));
    blocks_.free(seq->blocks);
    seq->num_computed = 0;
    seq->draft_tokens.clear();
    seq->draft_computed = 0;
    seq->status = SequenceStatus::Waiting;
    ++seq->num_preemptions;
    ++num_preemptions_;
    waiting_.push_back(seq);  // still active for its client: no VTC lift
    out.preempted.push_back(seq);
}

void Scheduler::charge(SequenceState& seq, int32_t count) {
    // Each token is charged once, when first computed: prompt tokens at the
    // input cost, generated ones at the output cost.
    const int32_t end = seq.num_computed + count;
    double cost = 0;
    for (int32_t t = std::max(seq.num_charged, seq.num_computed); t < end; ++t)
        cost += t < seq.num_prompt_tokens ? kInputTokenCost : kOutputTokenCost;
    seq.num_charged = std::max(seq.num_charged, end);
    counters_[seq.client] += cost;
}

// A prompt's chunk is capped only while another prompt waits or runs its
// prefill: alone, it may take the whole step.
int32_t Scheduler::prefill_cap(const StepBudget& budget) const {
    int32_t prefills = int32_t(waiting_.size());
    for (const SequenceState* s : running_) prefills += s->num_uncomputed() > 1;
    return prefills > 1 && budget.prefill_chunk > 0 ? budget.prefill_chunk : config_.max_num_batched_tokens;
}

SchedulerOutput Scheduler::schedule(const StepBudget& budget) {
    SchedulerOutput out;
    int32_t token_budget =
        budget.tokens > 0 ? std::min(budget.tokens, config_.max_num_batched_tokens) : config_.max_num_batched_tokens;
    const int32_t chunk_cap = prefill_cap(budget);
    int32_t logits_left = config_.max_logits_rows;

    // 1. Running sequences: decodes first, then prefill chunks, each group in arrival order.
    std::stable_sort(running_.begin(), running_.end(), [](const SequenceState* a, const SequenceState* b) {
        const bool da = a->num_uncomputed() == 1, db = b->num_uncomputed() == 1;
        if (da != db) return da;
        return a->arrival < b->arrival || (a->arrival == b->arrival && a->sample_index < b->sample_index);
    });
    std::vector<SequenceState*> todo = running_;
    for (size_t i = 0; i < todo.size() && token_budget > 0; ++i) {
        SequenceState* seq = todo[i];
        if (seq->status != SequenceStatus::Running) continue;  // preempted earlier in this loop
        const int32_t count =
            fit_logits(*seq, std::min({seq->num_wanted(), token_budget, chunk_cap}), logits_left);
        // Drafts the step has no room for are dropped (the proposer guesses again next step).
        seq->draft_tokens.resize(size_t(std::max(0, count - seq->num_uncomputed())));
        if (count == 0) continue;
        bool scheduled = false;
        while (true) {
            if (blocks_.allocate(seq->blocks, seq->num_computed, seq->num_computed + count, out.copies)) {
                scheduled = true;
                break;
            }
            // Out of blocks: preempt the lowest-priority sequence not yet scheduled (possibly this one).
            SequenceState* victim = seq;
            for (size_t j = i + 1; j < todo.size(); ++j)
                if (todo[j]->status == SequenceStatus::Running && lower_priority(todo[j], victim)) victim = todo[j];
            preempt(victim, out);
            if (victim == seq) break;
        }
        if (!scheduled) continue;
        charge(*seq, count);
        out.scheduled.push_back({seq, count});
        token_budget -= count;
        logits_left -= seq->logits_rows(count);
    }

    // 2. Admissions, in the policy's order; none in a step that had to preempt.
    if (out.preempted.empty()) {
        std::stable_sort(waiting_.begin(), waiting_.end(),
                         [this](const SequenceState* a, const SequenceState* b) { return before(a, b); });
        // A first sample that will fork holds the slots of its n - 1 siblings.
        int32_t slots_used = 0;
        for (const SequenceState* q : running_) slots_used += q->slots();
        while (!waiting_.empty() && token_budget > 0) {
            SequenceState* seq = waiting_.front();
            if (slots_used + seq->slots() > config_.max_num_seqs) break;
            // Reuse cached blocks of the prompt, unless its rows are wanted for their logits.
            const bool looked_up = seq->blocks.blocks.empty() && seq->may_reuse_cached_prefix();
            if (looked_up) seq->num_computed = blocks_.match_prefix(seq->tokens, seq->blocks);
            const int32_t count =
                fit_logits(*seq, std::min({seq->num_uncomputed(), token_budget, chunk_cap}), logits_left);
            if (count == 0 ||
                !blocks_.allocate(seq->blocks, seq->num_computed, seq->num_computed + count, out.copies)) {
                // Give the borrowed prefix back; try again next step. Blocks the
                // sequence came with (a decode instance's received KV) stay its own.
                if (looked_up) {
                    blocks_.cancel_prefix_match(seq->blocks, int64_t(seq->tokens.size()));
                    seq->num_computed = 0;
                }
                break;
            }
            waiting_.erase(waiting_.begin());
            seq->status = SequenceStatus::Running;
            running_.push_back(seq);
            slots_used += seq->slots();
            charge(*seq, count);
            out.scheduled.push_back({seq, count});
            token_budget -= count;
            logits_left -= seq->logits_rows(count);
        }
    }
    for (const ScheduledSequence& s : out.scheduled) out.num_tokens += s.num_tokens;
    return out;
}

}  // namespace minfer
