// The step plan: everything one forward pass needs, as flat arrays.
//
// Decode (1 row per sequence), a chunk of a prefill (many rows of one
// sequence) and speculative verification (1 + k rows) are the same call. The
// plan is plain data so that rank 0 can broadcast it to the other ranks.
#pragma once

#include <cstdint>
#include <vector>

namespace minfer {

struct StepPlan {
    // One entry per token row of the step, sequences back to back.
    std::vector<int32_t> token_ids;
    std::vector<int32_t> positions;     // position of each row in its sequence
    std::vector<int32_t> slot_mapping;  // where each row's K/V goes: block * block_size + offset

    // One entry per sequence.
    std::vector<int32_t> query_start;   // n_seqs + 1: rows of sequence s are [query_start[s], query_start[s+1])
    std::vector<int32_t> context_lens;  // tokens in the KV cache once this step has written its rows
    std::vector<int32_t> block_tables;  // n_seqs * max_blocks_per_seq, padded with -1
    int32_t max_blocks_per_seq = 0;

    // Rows whose logits are wanted (the last prompt row, every decode row, every
    // verification row), as indices into the token rows.
    // A row may appear more than once: n parallel samples of one prompt are n
    // logits rows of its last row.
    std::vector<int32_t> logits_rows;

    // KV blocks to copy before the step (copy-on-write), as pairs (src, dst).
    std::vector<int32_t> block_copies;

    int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
    int32_t num_seqs() const { return static_cast<int32_t>(context_lens.size()); }
    int32_t max_query_len() const;
    int32_t max_context_len() const;
    // Throws std::invalid_argument if the arrays disagree (sizes, ranges).
    void validate(int32_t num_kv_blocks, int32_t block_size) const;
};

}  // namespace minfer
