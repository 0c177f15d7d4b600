#include "engine/core/draft_proposer.h"

#include <algorithm>

namespace minfer {

DraftProposer::DraftProposer(const Model& draft, const RunnerLimits& limits)
    : runner_(draft, limits), planner_(limits.block_size) {}

void DraftProposer::run() {
    planner_.add_block_copies(pending_copies_);
    pending_copies_.clear();
    runner_.forward(planner_.finish());
}

// Rows [draft_computed, num_tokens - 1) of each sequence (the target computed
// them), packed into forward passes of at most max_num_batched_tokens rows and
// max_num_seqs sequences, without logits.
void DraftProposer::catch_up(std::span<DraftRequest* const> active) {
    const RunnerLimits& limits = runner_.limits();
    int32_t rows = 0, seqs = 0;
    for (DraftRequest* r : active) {
        SequenceState& seq = *r->seq;
        while (seq.draft_computed < seq.num_tokens() - 1) {
            if (rows == limits.max_num_batched_tokens || seqs == limits.max_num_seqs) {
                run();
                rows = seqs = 0;
            }
            const int32_t count = std::min(seq.num_tokens() - 1 - seq.draft_computed, limits.max_num_batched_tokens - rows);
            planner_.add_rows(seq, seq.draft_computed, count);
            seq.draft_computed += count;
            rows += count;
            ++seqs;
        }
    }
    if (rows > 0) run();
}

void DraftProposer::propose(std::span<DraftRequest> requests, BlockManager& blocks, std::vector<BlockCopy>& copies) {
    std::vector<DraftRequest*> active;
    for (DraftRequest& r : requests) {
        SequenceState& seq = *r.seq;
        seq.draft_tokens.clear();
        r.probs->clear();
        // Slots for every draft (the target's verification writes them too);
        // copies go to both pools, this one before its first write.
        const size_t before = copies.size();
        if (r.room <= 0 || !blocks.allocate(seq.blocks, seq.num_computed, seq.num_tokens() + r.room, copies)) continue;
        pending_copies_.insert(pending_copies_.end(), copies.begin() + long(before), copies.end());
        active.push_back(&r);
    }
    if (active.empty()) return;
    catch_up(active);

    const int32_t vocab = runner_.model().config().vocab_size;
    std::vector<float> probs(static_cast<size_t>(vocab));
    // Each sequence's tokens and the drafts so far: the history its penalties see.
    std::vector<std::vector<int32_t>> histories;
    std::vector<int32_t> wanted;     // drafts still wanted (fewer once a grammar ends the text)
    std::vector<size_t> advanced;    // drafts each grammar has accepted, rolled back at the end
    for (DraftRequest* r : active) {
        histories.push_back(r->seq->tokens);
        wanted.push_back(r->room);
        advanced.push_back(0);
    }
    std::vector<std::vector<uint32_t>> masks;
    for (int32_t j = 0;; ++j) {
        // Pass j: the token at position num_tokens - 1 + j (the last token, then each draft) of every
        // sequence that wants more than j drafts; its logits give draft j.
        std::vector<size_t> pass;  // indices into active
        for (size_t i = 0; i < active.size(); ++i)
            if (wanted[i] > j) pass.push_back(i);
        if (pass.empty()) break;
        for (size_t i : pass) {
            SequenceState& seq = *active[i]->seq;
            planner_.add_logits_row(planner_.add_rows(seq, seq.num_tokens() - 1 + j, 1));
        }
        run();
        // Each row processed as the target's row of that position will be.
        std::vector<SamplingRow> rows;
        masks.resize(pass.size());
        bool greedy = true;
        for (size_t k = 0; k < pass.size(); ++k) {
            DraftRequest& r = *active[pass[k]];
            const std::span<const int32_t> all(histories[pass[k]]);
            const size_t prompt = size_t(r.seq->num_prompt_tokens);
            const bool held = r.seq->num_output() + j < r.min_tokens;
            if (r.constraint) r.constraint->mask(masks[k], r.end_ids);
            rows.push_back({r.params, r.stream, int64_t(all.size()), all.first(prompt), all.subspan(prompt),
                            held ? r.held_back : std::span<const int32_t>{},
                            r.constraint ? std::span<const uint32_t>(masks[k]) : std::span<const uint32_t>{}, -1, {}});
            greedy = greedy && r.params->greedy();
        }
        // A greedy pass is sampled by the backend, as the target's rows are (on
        // a GPU only the ids come back); a sampled request's q must be kept, so a
        // pass with one reads its logits back and draws here.
        std::vector<int32_t> drafts;
        if (greedy) {
            drafts = runner_.sample(rows);
        } else {
            std::vector<float> logits = runner_.logits();  // sampling_distribution processes a row in place
            for (size_t k = 0; k < pass.size(); ++k) {
                DraftRequest& r = *active[pass[k]];
                sampling_distribution({logits.data() + k * size_t(vocab), size_t(vocab)}, rows[k], probs);
                if (r.params->greedy()) {
                    drafts.push_back(int32_t(std::max_element(probs.begin(), probs.end()) - probs.begin()));
                } else {
                    drafts.push_back(draw_from(probs, rows[k], Draw::Draft));
                    r.probs->push_back(probs);
                }
            }
        }
        for (size_t k = 0; k < pass.size(); ++k) {
            DraftRequest& r = *active[pass[k]];
            SequenceState& seq = *r.seq;
            const int32_t draft = drafts[k];
            seq.draft_tokens.push_back(draft);
            histories[pass[k]].push_back(draft);
            seq.draft_computed = seq.num_tokens() - 1 + j + 1;
            // The grammar follows the drafts; an end of text (or a refusal) ends them.
            if (r.constraint) {
                const bool ends = std::find(r.end_ids.begin(), r.end_ids.end(), draft) != r.end_ids.end();
                if (!ends && r.constraint->accept(draft))
                    ++advanced[pass[k]];
                else
                    wanted[pass[k]] = j + 1;
            }
        }
    }
    for (size_t i = 0; i < active.size(); ++i)
        if (active[i]->constraint) active[i]->constraint->rollback(advanced[i]);
}

}  // namespace minfer
