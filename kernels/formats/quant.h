// GGUF tensor formats: block layouts, reference dequantizers and our own
// reference quantizers. Scalar, portable and meant to be read; kernels keep
// their own fast versions and are tested against these.
//
// Layouts: ../shared/docs/gguf-notes.md section 3. Block geometry (elements and
// bytes per block) comes from ggml_type_traits in ggml_type.h. Dot products live
// elsewhere; this file is only about formats.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

#include "kernels/formats/ggml_type.h"

namespace minfer {

static_assert(std::endian::native == std::endian::little, "the block structs mirror little-endian file bytes");

// f16 fields are stored as raw IEEE half bits (uint16_t): see float16.h.
// The structs are packed (alignment 1) so they may describe bytes at any
// address; sizes and offsets are checked against the file format below.
#pragma pack(push, 1)

constexpr int kQK = 32;    // weights per block of the "legacy" types
constexpr int kQK_K = 256; // weights per super-block of the K types

struct BlockQ8_0 {  // w = d * qs
    uint16_t d;
    int8_t qs[kQK];
};
struct BlockQ4_0 {  // w = d * (q - 8); byte j holds weight j (low nibble) and j+16 (high)
    uint16_t d;
    uint8_t qs[kQK / 2];
};
struct BlockQ4_1 {  // w = d * q + m
    uint16_t d;
    uint16_t m;
    uint8_t qs[kQK / 2];
};
struct BlockQ5_0 {  // w = d * (q - 16); bit j of qh (little-endian u32) is the 5th bit of weight j
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[kQK / 2];
};
struct BlockQ5_1 {  // w = d * q + m
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[kQK / 2];
};
// 8 sub-blocks of 32; w = d*sc[s] * q - dmin*m[s], with 6-bit sc/m packed in
// `scales` (see q4k_scale_min) and q in 0..15.
struct BlockQ4_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qs[kQK_K / 2];
};
// As Q4_K with a 5th bit per weight in qh; q in 0..31.
struct BlockQ5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qh[kQK_K / 8];
    uint8_t qs[kQK_K / 2];
};
// 16 sub-blocks of 16; w = d * scales[s] * (q - 32), q in 0..63 (4 low bits in
// ql, 2 high bits in qh). Note the f16 d comes last.
struct BlockQ6_K {
    uint8_t ql[kQK_K / 2];
    uint8_t qh[kQK_K / 4];
    int8_t scales[kQK_K / 16];
    uint16_t d;
};
// The activation format for K-quant dot products: w = d * qs, with bsums[g]
// the sum of qs[16g .. 16g+15] (lets a kernel apply a weight block's mins
// once per group instead of once per weight). d is a full f32.
struct BlockQ8_K {
    float d;
    int8_t qs[kQK_K];
    int16_t bsums[kQK_K / 16];
};

#pragma pack(pop)

static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(offsetof(BlockQ5_K, qs) == 48 && offsetof(BlockQ6_K, d) == 208 && offsetof(BlockQ8_K, bsums) == 260);

// The 6-bit scale and min of sub-block s (0..7) of a Q4_K/Q5_K block.
// Bytes 0-3: sc of s=0..3 in the low 6 bits, top 2 bits of sc of s=4..7 above.
// Bytes 4-7: the same for the mins. Bytes 8-11: low 4 bits of sc (low nibble)
// and of m (high nibble) for s=4..7.
inline void q4k_scale_min(const uint8_t* scales, int s, uint8_t& sc, uint8_t& m) {
    if (s < 4) {
        sc = scales[s] & 63;
        m = scales[s + 4] & 63;
    } else {
        sc = static_cast<uint8_t>((scales[s + 4] & 0xF) | ((scales[s - 4] >> 6) << 4));
        m = static_cast<uint8_t>((scales[s + 4] >> 4) | ((scales[s] >> 6) << 4));
    }
}

// True for block-quantized types (block size > 1), whether or not we support them.
bool is_quantized(GGMLType t);
// Types dequantize_row / quantize_row handle: F32, F16, BF16, Q8_0, Q4_0,
// Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K and Q8_K.
bool can_dequantize(GGMLType t);
bool can_quantize(GGMLType t);

// n weights from/to n / block_elems consecutive blocks. n must be a
// non-negative multiple of the type's block size, and the type must be
// supported; otherwise std::invalid_argument. src/dst may have any alignment.
// The quantizers expect finite input.
void dequantize_row(GGMLType t, const void* src, float* dst, int64_t n);
void quantize_row(GGMLType t, const float* src, void* dst, int64_t n);

}  // namespace minfer
