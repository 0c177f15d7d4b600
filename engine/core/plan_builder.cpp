#include "engine/core/plan_builder.h"

#include <algorithm>
#include <utility>

namespace minfer {

PlanBuilder::PlanBuilder(int32_t block_size, std::vector<int32_t> eos_ids)
    : block_size_(block_size), eos_ids_(std::move(eos_ids)) {}

int32_t PlanBuilder::add_rows(const SequenceState& seq, int32_t first, int32_t count) {
    if (plan_.query_start.empty()) plan_.query_start.push_back(0);
    const int32_t first_row = plan_.num_tokens();
    const int32_t end = first + count, len = seq.num_tokens();
    const std::vector<int32_t>& blocks = seq.blocks.blocks;
    for (int32_t p = first; p < end; ++p) {
        plan_.token_ids.push_back(p < len ? seq.tokens[p] : seq.draft_tokens[p - len]);
        plan_.positions.push_back(p);
        plan_.slot_mapping.push_back(blocks[p / block_size_] * block_size_ + p % block_size_);
    }
    plan_.query_start.push_back(plan_.num_tokens());
    plan_.context_lens.push_back(end);
    tables_.push_back(&blocks);
    return first_row;
}

void PlanBuilder::add_block_copies(std::span<const BlockCopy> copies) {
    for (const BlockCopy& c : copies) {
        plan_.block_copies.push_back(c.src);
        plan_.block_copies.push_back(c.dst);
    }
}

StepPlan PlanBuilder::finish() {
    size_t width = 0;
    for (const auto* t : tables_) width = std::max(width, t->size());
    plan_.max_blocks_per_seq = static_cast<int32_t>(width);
    for (const auto* t : tables_)
        for (size_t b = 0; b < width; ++b) plan_.block_tables.push_back(b < t->size() ? (*t)[b] : -1);
    if (plan_.query_start.empty()) plan_.query_start.push_back(0);
    StepPlan done = std::move(plan_);
    plan_ = StepPlan{};
    tables_.clear();
    return done;
}

StepInputs PlanBuilder::build(const SchedulerOutput& scheduled) {
    StepInputs in;
    std::vector<LogitsUse> prompt_uses;  // asked for after the samples
    std::vector<int32_t> prompt_rows;
    for (const ScheduledSequence& sc : scheduled.scheduled) {
        Sequence& seq = as_sequence(*sc.seq);
        const int32_t first_row = add_rows(seq, sc.num_tokens);
        for (int32_t i = 0; i < sc.num_tokens; ++i) {
            const int32_t p = seq.num_computed + i;
            if (!seq.wants_prompt_logprob_row(p)) continue;
            prompt_rows.push_back(first_row + i);
            prompt_uses.push_back({&seq, -1, p});
        }
        // The step reaches the last token: draw the next one (n of them for a
        // first sample that forks into n), and verify each draft in its row.
        if (seq.num_computed + sc.num_tokens >= seq.num_tokens()) {
            const int32_t last = first_row + seq.num_uncomputed() - 1;
            const int32_t draws = seq.forks_on_first_sample() ? seq.request->options.n : 1;
            for (int32_t k = 0; k < draws; ++k) {
                add_logits_row(last);
                in.uses.push_back({&seq, draws > 1 ? k : seq.sample_index, -1});
            }
            for (int32_t d = 1; d <= int32_t(seq.draft_tokens.size()); ++d) {
                add_logits_row(last + d);
                in.uses.push_back({&seq, seq.sample_index, -1, d});
            }
        }
    }
    in.num_samples = in.uses.size();
    for (size_t i = 0; i < prompt_rows.size(); ++i) {
        add_logits_row(prompt_rows[i]);
        in.uses.push_back(prompt_uses[i]);
    }
    add_block_copies(scheduled.copies);
    in.plan = finish();

    in.needs_logits = !prompt_rows.empty();
    in.suppressed.resize(in.num_samples);
    in.histories.resize(in.num_samples);
    std::span<const int32_t> history;  // the current sequence's tokens, and drafts if it speculates
    for (size_t i = 0; i < in.num_samples; ++i) {
        const Sequence& seq = *in.uses[i].seq;
        const GenerationOptions& o = seq.request->options;
        const int32_t r = in.uses[i].spec_row;  // drafts before this row
        in.needs_logits |= o.logprobs >= 0;
        if (r == 0) {
            history = seq.tokens;
            if (!seq.draft_tokens.empty()) {
                in.histories[i] = seq.tokens;
                in.histories[i].insert(in.histories[i].end(), seq.draft_tokens.begin(), seq.draft_tokens.end());
                history = in.histories[i];
            }
        }
        if (seq.num_output() + r < o.min_tokens) in.suppressed[i] = held_back(o);
        const size_t len = size_t(seq.num_tokens() + r), prompt = size_t(seq.num_prompt_tokens);
        SamplingRow row{&o.sampling, uint64_t(in.uses[i].sample_stream), int64_t(len),
                        history.first(prompt), history.subspan(prompt, len - prompt), in.suppressed[i], {}, -1, {}};
        if (r < int32_t(seq.draft_tokens.size())) {
            row.draft_token = seq.draft_tokens[size_t(r)];
            if (size_t(r) < seq.draft_probs.size()) row.draft_probs = seq.draft_probs[size_t(r)];
        }
        in.sampling_rows.push_back(row);
    }
    return in;
}

std::vector<int32_t> PlanBuilder::held_back(const GenerationOptions& o) const {
    std::vector<int32_t> ids = o.stop_token_ids;
    const std::span<const int32_t> eos = end_ids(o);
    ids.insert(ids.end(), eos.begin(), eos.end());
    return ids;
}

void fill_draft_masks(grammar::Constraint& constraint, std::span<const int32_t> drafts,
                      std::span<const int32_t> end_ids, std::span<std::vector<uint32_t>> masks) {
    constraint.mask(masks[0], end_ids);
    size_t advanced = 0;
    for (size_t d = 0; d < drafts.size(); ++d) {
        const bool refused = advanced < d || std::find(end_ids.begin(), end_ids.end(), drafts[d]) != end_ids.end() ||
                             !constraint.accept(drafts[d]);
        if (refused) {
            masks[d + 1] = masks[d];
            continue;
        }
        ++advanced;
        constraint.mask(masks[d + 1], end_ids);
    }
    constraint.rollback(advanced);
}

void PlanBuilder::fill_masks(StepInputs& in) {
    in.masks.assign(in.num_samples, {});
    // A fork's first token (sample k > 0 of a fresh prompt) starts from the
    // same grammar state as sample 0's: one mask a sequence, copied to its other rows.
    std::vector<size_t> first;  // rows whose sequence has a constraint, one a sequence
    for (size_t i = 0; i < in.num_samples; ++i) {
        const Sequence* seq = in.uses[i].seq;
        if (seq->constraint && std::none_of(first.begin(), first.end(), [&](size_t f) { return in.uses[f].seq == seq; }))
            first.push_back(i);
    }
    if (first.size() > 1 && !workers_) workers_ = std::make_unique<MaskWorkers>();
    const auto one = [&](size_t k) {
        const size_t i = first[k];
        Sequence& seq = *in.uses[i].seq;
        fill_draft_masks(*seq.constraint, seq.draft_tokens, end_ids(seq.request->options),
                         std::span(in.masks).subspan(i, seq.draft_tokens.size() + 1));
    };
    if (workers_) {
        workers_->run(first.size(), one);
    } else {
        for (size_t k = 0; k < first.size(); ++k) one(k);
    }
    for (size_t i = 0; i < in.num_samples; ++i) {
        if (in.uses[i].spec_row == 0)  // a fork's row: sample 0's
            for (const size_t f : first)
                if (f != i && in.uses[f].seq == in.uses[i].seq) in.masks[i] = in.masks[f];
        in.sampling_rows[i].allowed_mask = in.masks[i];
    }
}

}  // namespace minfer
