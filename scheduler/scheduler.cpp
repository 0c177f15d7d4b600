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

void Scheduler::add_waiting(Sequence* seq) {
    seq->status = SequenceStatus::Waiting;
    waiting_.push_back(seq);
    client_active(seq->request->options.client, +1);
}

void Scheduler::add_running(Sequence* seq) {
    seq->status = SequenceStatus::Running;
    running_.push_back(seq);
    client_active(seq->request->options.client, +1);
}

void Scheduler::remove(Sequence* seq) {
    auto drop = [&](std::vector<Sequence*>& list) {
        auto it = std::find(list.begin(), list.end(), seq);
        if (it == list.end()) return false;
        list.erase(it);
        return true;
    };
    if (drop(running_) || drop(waiting_)) client_active(seq->request->options.client, -1);
    blocks_.free(seq->blocks);
}

bool Scheduler::before(const Sequence* a, const Sequence* b) const {
    const Request& ra = *a->request;
    const Request& rb = *b->request;
    if (config_.policy == SchedulingPolicy::Priority && ra.options.priority != rb.options.priority)
        return ra.options.priority < rb.options.priority;
    if (config_.policy == SchedulingPolicy::Fair) {
        const double ca = counters_.at(ra.options.client), cb = counters_.at(rb.options.client);
        if (ca != cb) return ca < cb;
    }
    if (ra.arrival != rb.arrival) return ra.arrival < rb.arrival;
    return a->sample_index < b->sample_index;
}

bool Scheduler::lower_priority(const Sequence* a, const Sequence* b) {
    const Request& ra = *a->request;
    const Request& rb = *b->request;
    if (ra.options.priority != rb.options.priority) return ra.options.priority > rb.options.priority;
    if (ra.arrival != rb.arrival) return ra.arrival > rb.arrival;
    return a->sample_index > b->sample_index;
}

// The largest count <= `count` whose logits rows fit in rows_left (0 if none).
int32_t Scheduler::fit_logits(const Sequence& seq, int32_t count, int32_t rows_left) const {
    while (count > 0 && logits_rows_for(seq, count) > rows_left) --count;
    return count;
}

void Scheduler::preempt(Sequence* seq, SchedulerOutput& out) {
    running_.erase(std::find(running_.begin(), running_.end(), seq));
    blocks_.free(seq->blocks);
    seq->num_computed = 0;
    seq->status = SequenceStatus::Waiting;
    ++seq->num_preemptions;
    ++num_preemptions_;
    waiting_.push_back(seq);  // still active for its client: no VTC lift
    out.preempted.push_back(seq);
}

void Scheduler::charge(Sequence& seq, int32_t count) {
    // Each token is charged once, when first computed: prompt tokens at the
    // input cost, generated ones at the output cost.
    const int32_t end = seq.num_computed + count;
    double cost = 0;
    for (int32_t t = std::max(seq.num_charged, seq.num_computed); t < end; ++t)
        cost += t < seq.num_prompt_tokens ? kInputTokenCost : kOutputTokenCost;
    seq.num_charged = std::max(seq.num_charged, end);
    counters_[seq.request->options.client] += cost;
}

SchedulerOutput Scheduler::schedule() {
    SchedulerOutput out;
    int32_t token_budget = config_.max_num_batched_tokens;
    int32_t logits_left = config_.max_logits_rows;

    // 1. Running sequences: decodes first, then prefill chunks, each group in arrival order.
    std::stable_sort(running_.begin(), running_.end(), [](const Sequence* a, const Sequence* b) {
        const bool da = a->num_uncomputed() == 1, db = b->num_uncomputed() == 1;
        if (da != db) return da;
        return a->request->arrival < b->request->arrival ||
               (a->request->arrival == b->request->arrival && a->sample_index < b->sample_index);
    });
    std::vector<Sequence*> todo = running_;
    for (size_t i = 0; i < todo.size() && token_budget > 0; ++i) {
        Sequence* seq = todo[i];
        if (seq->status != SequenceStatus::Running) continue;  // preempted earlier in this loop
        const int32_t count = fit_logits(*seq, std::min(seq->num_uncomputed(), token_budget), logits_left);
        if (count == 0) continue;
        bool scheduled = false;
        while (true) {
            if (blocks_.allocate(seq->blocks, seq->num_computed, seq->num_computed + count, out.copies)) {
                scheduled = true;
                break;
            }
            // Out of blocks: preempt the lowest-priority sequence not yet scheduled (possibly this one).
            Sequence* victim = seq;
            for (size_t j = i + 1; j < todo.size(); ++j)
                if (todo[j]->status == SequenceStatus::Running && lower_priority(todo[j], victim)) victim = todo[j];
            preempt(victim, out);
            if (victim == seq) break;
        }
        if (!scheduled) continue;
        charge(*seq, count);
        out.scheduled.push_back({seq, count});
        token_budget -= count;
        logits_left -= logits_rows_for(*seq, count);
    }

    // 2. Admissions, in the policy's order; none in a step that had to preempt.
    if (out.preempted.empty()) {
        std::stable_sort(waiting_.begin(), waiting_.end(),
                         [this](const Sequence* a, const Sequence* b) { return before(a, b); });
        // A first sample that will fork holds the slots of its n - 1 siblings.
        auto slots_of = [](const Sequence* q) { return q->forks_on_first_sample() ? q->request->options.n : 1; };
        int32_t slots_used = 0;
        for (const Sequence* q : running_) slots_used += slots_of(q);
        while (!waiting_.empty() && token_budget > 0) {
            Sequence* seq = waiting_.front();
            if (slots_used + slots_of(seq) > config_.max_num_seqs) break;
            // Reuse cached blocks of the prompt (not when the prompt's own logprobs are wanted: they need its rows).
            const bool looked_up = seq->blocks.blocks.empty() && !seq->prompt_logprobs_pending();
            if (looked_up) seq->num_computed = blocks_.match_prefix(seq->tokens, seq->blocks);
            const int32_t count = fit_logits(*seq, std::min(seq->num_uncomputed(), token_budget), logits_left);
            if (count == 0 ||
                !blocks_.allocate(seq->blocks, seq->num_computed, seq->num_computed + count, out.copies)) {
                // Give the borrowed prefix back; try again next step.
                if (looked_up)
                    blocks_.cancel_prefix_match(seq->blocks, int64_t(seq->tokens.size()));
                else
                    blocks_.free(seq->blocks);
                seq->num_computed = 0;
                break;
            }
            waiting_.erase(waiting_.begin());
            seq->status = SequenceStatus::Running;
            running_.push_back(seq);
            slots_used += slots_of(seq);
            charge(*seq, count);
            out.scheduled.push_back({seq, count});
            token_budget -= count;
            logits_left -= logits_rows_for(*seq, count);
        }
    }
    for (const ScheduledSequence& s : out.scheduled) out.num_tokens += s.num_tokens;
    return out;
}

}  // namespace minfer
