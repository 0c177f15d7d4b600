// out[rows, N] = x[rows, K] * W^T (+ bias) for a weight W of N rows of K
// elements in any supported GGUF type, on a thread pool.
//
// Batch invariance. Continuous batching puts a sequence's token in a step
// with a varying set of others, so row m of the output must not depend on
// how many rows there are, what they hold, or how many threads run: then a
// sequence's logits are the same whether it decodes alone or in a crowd.
// Floating-point addition is not associative, so that holds only if every
// output element is computed by one fixed sequence of operations. Here it
// is: each element is the dot product of vec_dot.h, in the weight's own
// format (quantized weights meet int8-quantized activations), with one lane
// assignment along K, one accumulation order and one reduction tree, whatever
// the row count. (This file used to switch from a per-row GEMV to a float
// GEMM above 4 rows, so a sequence's logits moved with the batch size.)
//
// Speed comes from tiling, not from a second algorithm. dot_tile computes
// RM x RN dot products at once (RM activation rows x RN weight rows, e.g.
// 6 x 4 for f16): each accumulator is a 16-lane vector along K, and each step
// loads a piece of every weight row and every activation row once, so RM + RN
// loads feed RM x RN multiply-adds and the kernel is compute-bound where a
// dot product alone is load-bound. Since each element's own arithmetic is the
// same in every tile shape, a decode step (1 x RN tiles) and a prefill
// (RM x RN) give the same bits.
//
// Work is split over output features: each thread takes a contiguous range of
// RN-row tiles of W (for decode the weights stream from memory once), and
// over row tiles too when W has too few tiles to go round. Within a range,
// blocks of W small enough for L2 are swept by every row tile. No dot product
// is ever split across threads, so the thread count cannot change a bit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/formats/ggml_type.h"
#include "kernels/cpu/panels.h"
#include "kernels/cpu/thread_pool.h"

namespace minfer::cpu {

struct MatmulWeight {
    GGMLType type;
    int64_t rows;       // N, output features
    int64_t cols;       // K, input features
    const uint8_t* data;
    size_t row_bytes;
    // For the types of uses_panels: the rows repacked (the backend packs them
    // once at load; without, matmul packs them for the call).
    const PanelMatrix* panels = nullptr;
    const uint8_t* row(int64_t r) const { return data + size_t(r) * row_bytes; }
};

// True if matmul takes weights of this type.
bool matmul_supports(GGMLType t);

void matmul(ThreadPool& pool, const MatmulWeight& w, const float* x, int64_t rows, const float* bias, float* out);

// The plain reference the fast path is tested against: double accumulation
// over dequantized weights.
void matmul_reference(const MatmulWeight& w, const float* x, int64_t rows, const float* bias, float* out);

// Widens row r of w to float.
void widen_row(const MatmulWeight& w, int64_t r, float* out);

}  // namespace minfer::cpu
