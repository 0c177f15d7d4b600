// out[rows, N] = x[rows, K] * W^T (+ bias) for a weight W of N rows of K
// elements in any supported GGUF type, on a thread pool.
//
// Two regimes, as in llama.cpp:
//  - few rows (decode): a GEMV per row, in the weight's own format (quantized
//    weights meet int8-quantized activations; see vec_dot.h). Memory-bound: the
//    weights stream through once, split across threads by output feature.
//  - many rows (prefill): a GEMM. Each thread widens a panel of 32 weight rows
//    to float once, laid out [K][32], and runs a register-blocked micro-kernel
//    over all activation rows. Compute-bound: the panel is reused rows times.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/gguf.h"
#include "kernels/cpu/thread_pool.h"

namespace minfer::cpu {

struct MatmulWeight {
    GGMLType type;
    int64_t rows;       // N, output features
    int64_t cols;       // K, input features
    const uint8_t* data;
    size_t row_bytes;
    const uint8_t* row(int64_t r) const { return data + size_t(r) * row_bytes; }
};

// Up to this many activation rows take the GEMV path.
constexpr int64_t kGemvMaxRows = 4;

void matmul(ThreadPool& pool, const MatmulWeight& w, const float* x, int64_t rows, const float* bias, float* out);

// The plain reference the fast paths are tested against: double accumulation
// over dequantized weights.
void matmul_reference(const MatmulWeight& w, const float* x, int64_t rows, const float* bias, float* out);

// Widens row r of w to float.
void widen_row(const MatmulWeight& w, int64_t r, float* out);

}  // namespace minfer::cpu
