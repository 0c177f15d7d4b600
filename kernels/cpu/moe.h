// The mixture-of-experts FFN on the CPU: routing, then each expert's matmuls
// over the rows routed to it, then each row's weighted combine.
//
// Grouping rows by expert lets an expert's weights stream from memory once
// for all its rows, as a dense FFN's do for the whole step. It keeps batch
// invariance: matmul computes every row the same way whatever rows are
// beside it (matmul.h), and a row's k expert outputs are added in its own
// routing order, so a row's result does not depend on the rest of the step.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/thread_pool.h"

namespace minfer::cpu {

// Per row of logits [rows, n_experts]: softmax, the k most probable experts
// (ties: the lower id first) into ids [rows, k] and their probabilities into
// weights [rows, k], divided by their sum when `renormalize`.
void moe_route(const float* logits, int64_t rows, int32_t n_experts, int32_t k, bool renormalize, int32_t* ids,
               float* weights);

// Reused between calls, so a step allocates nothing once they have grown.
struct MoeScratch {
    std::vector<int32_t> pairs;   // (row * k + slot) indices, grouped by expert
    std::vector<int32_t> starts;  // expert e's pairs: [starts[e], starts[e + 1])
    std::vector<int32_t> next;    // the sort's cursor per expert
    std::vector<float> x, gate, up, expert_y, y;
};

// out[r] = sum over j < k of weights[r*k + j] * down_e(silu(gate_e x_r) * up_e x_r), e = ids[r*k + j];
// gate, up and down hold one matrix per expert of the slice first_expert ..
// first_expert + gate.size() - 1: pairs of other experts add nothing (a row
// with none is 0).
void moe_experts(ThreadPool& pool, std::span<const MatmulWeight> gate, std::span<const MatmulWeight> up,
                 std::span<const MatmulWeight> down, int32_t first_expert, const float* x, const int32_t* ids,
                 const float* weights, int64_t rows, int32_t k, MoeScratch& scratch, float* out);

}  // namespace minfer::cpu
