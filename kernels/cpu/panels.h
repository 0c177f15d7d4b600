// Weights of the types Q8_0, Q4_0, Q4_1 and Q4_K repacked in panels of 16
// rows, so that one 512-bit integer dot product (VNNI's vpdpbusd) computes
// 4-element pieces of 16 different rows at once.
//
// Why. In a row's own layout a dot product keeps 16 lanes of partial sums of
// one row and must add them up at the end, and each block's two-byte scale
// has to be spread over lanes; decoding streams 4 rows from 4 places. In a
// panel, lane l is row l: a block's 32 weights of 16 rows are 8 (Q8_0) or 4
// (Q4_x, two nibbles a byte) consecutive 64-byte vectors, each multiplied by
// 4 bytes of the activation broadcast to all lanes; the 16 scales of a block
// are one 32-byte load. The panel is read front to back (the same layout
// llama.cpp repacks to for AMX and for ARM).
//
// The arithmetic of one output (activation row x, weight row w), blocks b in
// order, one float accumulator:
//   I   = sum over the block of q_w * q_x - offset * sum(q_x)   (exact int32)
//   acc = fma(float(I), d_w * d_x, acc)
//   Q4_1 also: acc = fma(m_w, d_x * float(sum(q_x)), acc)
// with q_w unsigned (Q8_0: q + 128, offset 128; Q4_0: offset 8; Q4_1: 0) and
// q_x the activation's int8 quants (ActQ8Block). Q4_K's super-blocks of 256
// (w = d * sc_s * q - dmin * m_s in sub-block s of 32) meet BlockQ8_K
// activations:
//   I   = sum over s of sc_s * (sum over sub-block s of q_w * q_x)   (exact int32)
//   M   = sum over s of m_s * (sum of sub-block s of q_x)             (exact int32)
//   acc = fma(fma(float(I), d_w, -(float(M) * dmin_w)), d_x, acc)
// The integer sums are exact in any order, so every kernel (one row or many,
// any tile, AVX-512 or plain C++) gives the same bits: matmul stays batch
// invariant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/formats/ggml_type.h"

namespace minfer::cpu {

struct MatmulWeight;

constexpr int kPanelRows = 16;

// True for the types matmul computes from panels.
bool uses_panels(GGMLType t);

// One block of 32 activations, int8-quantized (x ~ d * qs).
struct ActQ8Block {
    int8_t qs[32];
    float d;
    int32_t sum;   // sum of qs
    float dsum;    // d * float(sum): Q4_1's min term
    int32_t pad;
};
static_assert(sizeof(ActQ8Block) == 48);

// Bytes of one prepared activation row of n elements (n a multiple of the
// type's block): ActQ8Blocks, or BlockQ8_K for Q4_K.
size_t panel_act_bytes(GGMLType t, int64_t n);
void prepare_panel_activations(GGMLType t, const float* x, void* out, int64_t n);
void quantize_act_q8_32(const float* x, ActQ8Block* out, int64_t n);

// A weight's panels. Panel p holds rows 16p..16p+15 (the last one padded with
// zero rows): first the f16 scales of every block, [blocks][16] (Q4_K: d
// then dmin, [blocks][2][16]), then for Q4_1 the mins the same way, then the
// quants of every block; each part is padded to 64 bytes.
//   Q8_0: per block 8 vectors; vector g holds, row by row, the 4 bytes q + 128
//         of elements 4g..4g+3.
//   Q4_0, Q4_1: per block 4 vectors; vector h holds, row by row, 4 bytes whose
//         low nibbles are elements 8h..8h+3 and high nibbles 8h+4..8h+7.
//   Q4_K: per super-block the sub-block scales sc as bytes [8][16], the mins
//         as int16 pairs [4][16][2] (m_2k, m_2k+1), then sub-block s's quants
//         as 4 vectors like Q4_0's.
struct PanelMatrix {
    GGMLType type{};
    int64_t rows = 0, cols = 0;     // N, K
    int64_t panels = 0, blocks = 0;  // ceil(N / 16), K / 32 (Q4_K: K / 256)
    size_t scale_bytes = 0;          // one panel's scales (and as many again for the mins)
    size_t quant_bytes = 0;          // one block of one panel's quants (Q4_K: scales and mins too)
    size_t panel_bytes = 0;
    std::unique_ptr<uint8_t, void (*)(void*)> data{nullptr, nullptr};

    const uint8_t* panel(int64_t p) const { return data.get() + size_t(p) * panel_bytes; }
};

// Repacks w (one of uses_panels' types; rows read through w.row, so a shard
// works too). Throws std::invalid_argument for other types.
PanelMatrix pack_panels(const MatmulWeight& w);

// out[i * ldo + 16 * j + l] = dot(row 16 (p0 + j) + l, activation row i) for
// i < rm, j < np, l < 16 (rows past the matrix included: they are 0).
// Activation row i starts at act + i * act_stride.
using PanelTileFn = void (*)(const PanelMatrix& w, int64_t p0, const uint8_t* act, size_t act_stride,
                             float* out, int64_t ldo);
struct PanelTileShape {
    int rm;  // activation rows
    int np;  // panels
};
// The largest tile for several activation rows, and for one (decode).
PanelTileShape panel_tile_shape(GGMLType t, bool one_row);
PanelTileFn panel_tile_fn(GGMLType t, int rm, int np);

// The plain C++ statement of the arithmetic for one output, that the tiles
// are tested against bit for bit.
float panel_dot_spec(const PanelMatrix& w, int64_t row, const void* act);

}  // namespace minfer::cpu
