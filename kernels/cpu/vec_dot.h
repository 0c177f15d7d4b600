// Dot products of weight rows with activation rows, in the weight's own format:
// F32/F16/BF16 rows meet float activations; quantized rows meet activations
// quantized per block to int8 (as llama.cpp does), so the inner loop multiplies
// integers and applies the scales once per block.
//
// One arithmetic order per element. dot_tile computes a tile of rm x rn dot
// products at once (rm activation rows, rn weight rows) and vec_dot is its
// 1 x 1 case; every element of every tile shape goes through the same
// per-element steps, so a dot product's bits never depend on what it was
// computed next to. vec_dot_spec states that arithmetic in plain C++, lane by
// lane (see vec_dot.cpp); the SIMD kernels are tested bitwise against it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/formats/ggml_type.h"

namespace minfer::cpu {

// How activations must be prepared for a weight type.
enum class ActFormat {
    F32,    // floats, zero-padded to a multiple of 16 (F32, F16, BF16 weights)
    Q8_32,  // ActQ8Pair: int8 blocks of 32 (Q5_0, Q5_1; Q8_0 and Q4_x use panels.h)
    Q8_K,   // BlockQ8_K: int8 blocks of 256 with sums of 16 (Q4_K, Q5_K, Q6_K)
};

// Two blocks of 32 activations (qs = x / d rounded), laid out for one 512-bit
// step: the scales are already spread over the 16 lanes that hold each
// block's partial sums. A missing second block (odd block count) is all zero.
struct ActQ8Pair {
    int8_t qs[64];
    float d[16];       // lanes 0-7: the first block's scale, 8-15: the second's
    int32_t nsum[16];  // lane 0: minus the sum of the first block's qs, lane 8: of the second's; 0 elsewhere
};
static_assert(sizeof(ActQ8Pair) == 192);

ActFormat act_format(GGMLType weight_type);
// Bytes of one prepared activation row of n elements (a multiple of 64).
size_t act_row_bytes(ActFormat f, int64_t n);
// Prepares one activation row (n must be a multiple of the weight's block).
// `out` should be 64-byte aligned.
void prepare_activations(ActFormat f, const float* x, void* out, int64_t n);

// True if dot products support weights of this type (Q8_0, Q4_0 and Q4_1
// are multiplied from panels instead: panels.h).
bool has_vec_dot(GGMLType t);

// The largest tile dot_tile takes for a type.
struct TileShape {
    int rm;  // activation rows
    int rn;  // weight rows
};
TileShape tile_shape(GGMLType t);

// out[i * ldo + j] = dot(weight row j, activation row i) for i < rm, j < rn,
// with 1 <= rm, rn <= tile_shape(t). Weight row j starts at w + j * w_stride;
// activation row i (prepare_activations' output) at act + i * act_stride.
using DotTileFn = void (*)(const uint8_t* w, size_t w_stride, const uint8_t* act, size_t act_stride, int64_t n,
                           float* out, int64_t ldo);
DotTileFn dot_tile_fn(GGMLType t, int rm, int rn);

// One weight row against one prepared activation row: the 1 x 1 tile.
float vec_dot(GGMLType t, const void* w_row, const void* act, int64_t n);
// The same number, computed by the plain C++ statement of the arithmetic.
float vec_dot_spec(GGMLType t, const void* w_row, const void* act, int64_t n);

}  // namespace minfer::cpu
