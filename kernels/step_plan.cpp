#include "kernels/step_plan.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace minfer {

int32_t StepPlan::max_query_len() const {
    int32_t m = 0;
    for (size_t s = 0; s + 1 < query_start.size(); ++s) m = std::max(m, query_start[s + 1] - query_start[s]);
    return m;
}

int32_t StepPlan::max_context_len() const {
    int32_t m = 0;
    for (int32_t c : context_lens) m = std::max(m, c);
    return m;
}

void StepPlan::validate(int32_t num_kv_blocks, int32_t block_size) const {
    auto fail = [](const std::string& what) { throw std::invalid_argument("invalid step plan: " + what); };
    const size_t n = token_ids.size();
    const size_t seqs = context_lens.size();
    if (positions.size() != n || slot_mapping.size() != n) fail("per-row arrays differ in length");
    if (query_start.size() != seqs + 1 || query_start.front() != 0 || query_start.back() != static_cast<int32_t>(n))
        fail("query_start does not cover the rows");
    if (block_tables.size() != seqs * static_cast<size_t>(max_blocks_per_seq)) fail("block_tables size");
    for (size_t s = 0; s < seqs; ++s) {
        const int32_t q0 = query_start[s], q1 = query_start[s + 1];
        if (q1 < q0) fail("query_start not increasing");
        const int32_t ctx = context_lens[s];
        if (ctx < q1 - q0 || ctx > max_blocks_per_seq * block_size) fail("context length out of range");
        for (int32_t b = 0; b < (ctx + block_size - 1) / block_size; ++b) {
            const int32_t blk = block_tables[s * max_blocks_per_seq + b];
            if (blk < 0 || blk >= num_kv_blocks) fail("block table entry out of range");
        }
        for (int32_t r = q0; r < q1; ++r)
            if (positions[r] != ctx - (q1 - r)) fail("positions must be the last rows of the context");
    }
    for (int32_t slot : slot_mapping)
        if (slot < 0 || slot >= num_kv_blocks * block_size) fail("slot out of range");
    if (block_copies.size() % 2) fail("block_copies must hold (src, dst) pairs");
    for (int32_t b : block_copies)
        if (b < 0 || b >= num_kv_blocks) fail("block copy out of range");
    for (int32_t r : logits_rows)
        if (r < 0 || r >= static_cast<int32_t>(n)) fail("logits row out of range");
}

}  // namespace minfer
