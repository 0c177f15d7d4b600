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
    std::vector<int32_t> history;
    for (int32_t j = 0;; ++j) {
        // Pass j: the token at position num_tokens - 1 + j (the last token, then each draft) of every
        // sequence that wants more than j drafts; its logits give draft j.
        std::vector<DraftRequest*> pass;
        for (DraftRequest* r : active)
            if (r->room > j) pass.push_back(r);
        if (pass.empty()) break;
        for (DraftRequest* r : pass) {
            SequenceState& seq = *r->seq;
            planner_.add_logits_row(planner_.add_rows(seq, seq.num_tokens() - 1 + j, 1));
        }
        run();
        std::vector<float> logits = runner_.logits();
        for (size_t k = 0; k < pass.size(); ++k) {
            DraftRequest& r = *pass[k];
            SequenceState& seq = *r.seq;
            history = seq.tokens;
            history.insert(history.end(), seq.draft_tokens.begin(), seq.draft_tokens.end());
            const std::span<const int32_t> all(history);
            const size_t prompt = size_t(seq.num_prompt_tokens);
            const SamplingRow row{r.params, r.stream, int64_t(history.size()), all.first(prompt), all.subspan(prompt),
                                  {}, {}, -1, {}};
            sampling_distribution({logits.data() + k * size_t(vocab), size_t(vocab)}, row, probs);
            if (r.params->greedy()) {
                seq.draft_tokens.push_back(int32_t(std::max_element(probs.begin(), probs.end()) - probs.begin()));
            } else {
                seq.draft_tokens.push_back(draw_from(probs, row, Draw::Draft));
                r.probs->push_back(probs);
            }
            seq.draft_computed = seq.num_tokens() - 1 + j + 1;
        }
    }
}

}  // namespace minfer
