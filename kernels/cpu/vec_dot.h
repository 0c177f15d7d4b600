// Dot products of one weight row with one activation row, in the weight's own
// format: F32/F16/BF16 rows meet float activations; quantized rows meet
// activations quantized per block to int8 (as llama.cpp does), so the inner
// loop multiplies integers and applies the scales once per block.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/gguf.h"

namespace minfer::cpu {

// How activations must be prepared for a weight type.
enum class ActFormat {
    F32,    // the float row as it is (F32, F16, BF16 weights)
    Q8_32,  // blocks of 32: f32 scale, sum of the quants, 32 int8 (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1)
    Q8_K,   // blocks of 256: BlockQ8_K (Q4_K, Q5_K, Q6_K)
};

struct ActQ8_32 {
    float d;
    int32_t sum;  // sum of qs: lets Q4_1/Q5_1 apply their min once per block
    int8_t qs[32];
};

ActFormat act_format(GGMLType weight_type);
// Bytes of one prepared activation row of n elements.
size_t act_row_bytes(ActFormat f, int64_t n);
// Prepares one activation row (n must be a multiple of the format's block).
void prepare_activations(ActFormat f, const float* x, void* out, int64_t n);

// True if vec_dot supports weights of this type.
bool has_vec_dot(GGMLType t);
// w_row: one row of n weights of type t; act: prepare_activations' output for act_format(t).
float vec_dot(GGMLType t, const void* w_row, const void* act, int64_t n);

}  // namespace minfer::cpu
