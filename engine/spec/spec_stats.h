// Speculative decoding's counters, with vLLM's meanings:
//   num_drafts                a sequence verified drafts in a step (once per sequence and step)
//   num_draft_tokens          draft tokens verified
//   num_accepted_tokens       of those, accepted
//   accepted_per_pos[i]       drafts accepted at position i of their run
// The acceptance rate is accepted / draft tokens; the mean acceptance length
// 1 + accepted / drafts counts the token the target adds to every run.
#pragma once

#include <cstdint>
#include <vector>

namespace minfer {

struct SpecDecodeStats {
    int64_t num_drafts = 0;
    int64_t num_draft_tokens = 0;
    int64_t num_accepted_tokens = 0;
    std::vector<int64_t> accepted_per_pos;

    void record(int32_t drafted, int32_t accepted) {
        if (drafted <= 0) return;
        ++num_drafts;
        num_draft_tokens += drafted;
        num_accepted_tokens += accepted;
        if (accepted_per_pos.size() < size_t(drafted)) accepted_per_pos.resize(size_t(drafted), 0);
        for (int32_t i = 0; i < accepted; ++i) ++accepted_per_pos[size_t(i)];
    }
    // What was counted after `before`, a reading of the same counters.
    SpecDecodeStats since(const SpecDecodeStats& before) const {
        SpecDecodeStats d{num_drafts - before.num_drafts, num_draft_tokens - before.num_draft_tokens,
                          num_accepted_tokens - before.num_accepted_tokens, accepted_per_pos};
        for (size_t i = 0; i < before.accepted_per_pos.size() && i < d.accepted_per_pos.size(); ++i)
            d.accepted_per_pos[i] -= before.accepted_per_pos[i];
        return d;
    }
    double acceptance_rate() const { return num_draft_tokens ? double(num_accepted_tokens) / num_draft_tokens : 0.0; }
    double mean_acceptance_length() const { return num_drafts ? 1.0 + double(num_accepted_tokens) / num_drafts : 0.0; }
};

// Drafts accepted: how many leading drafts the verifying rows returned unchanged.
inline int32_t accepted_prefix(const int32_t* drafts, const int32_t* sampled, int32_t count) {
    int32_t m = 0;
    while (m < count && sampled[m] == drafts[m]) ++m;
    return m;
}

}  // namespace minfer
