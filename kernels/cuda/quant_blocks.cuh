// GGUF quantized blocks decoded on the device, one struct per type. The block
// layouts are GGML's; engine/quant.{h,cpp} has them with the CPU reference
// decoders, which these mirror. Two layouts differ from the file's, made when a
// matrix is uploaded so that every block is 16-byte aligned (gemv_int8.cu loads
// whole words): Q6_K's 210-byte blocks padded to 224 bytes (every field keeps
// its offset), and Q8_0's regrouped by 8 (Q8_0x8).
//
// A block is cut into kUnits units of 8 * kSubs weights. load(block, u) reads
// unit u's bytes and scales into registers, as wide as the block's alignment
// allows (kAlign: a block's address modulo 16 is a multiple of it whenever the
// matrix starts on a 16-byte boundary). dequant(unit, s, w) then turns sub-group
// s into 8 floats lying in two runs of 4 columns: w[0..3] are columns
// col(u, s, 0)..+3 of the block, w[4..7] columns col(u, s, 1)..+3.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace minfer::cuda::quant {

__device__ __forceinline__ float half_at(const uint8_t* p) {  // every f16 field is 2-byte aligned
    return __half2float(*reinterpret_cast<const __half*>(p));
}
__device__ __forceinline__ float low_half(uint32_t v) { return __half2float(__ushort_as_half(uint16_t(v))); }
__device__ __forceinline__ float high_half(uint32_t v) { return __half2float(__ushort_as_half(uint16_t(v >> 16))); }

template <int Align>
__device__ __forceinline__ uint32_t u32_at(const uint8_t* p) {
    if constexpr (Align >= 4) {
        return *reinterpret_cast<const uint32_t*>(p);
    } else {
        const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
        return h[0] | uint32_t(h[1]) << 16;
    }
}

// Levels (each byte of v below 64) to floats f = 1 + q/128: the byte, with its
// top bit set, becomes the exponent's last bit and the mantissa's top bits
// under 0x3F (1.0f is 0x3F800000). A weight a*q + c is then fmaf(128a, f,
// c - 128a): one FMA per weight, no int-to-float conversion (quarter rate).
__device__ __forceinline__ void levels(uint32_t v, float* f) {
    v |= 0x80808080u;
    f[0] = __int_as_float(__byte_perm(v, 0x3F000000u, 0x7054));
    f[1] = __int_as_float(__byte_perm(v, 0x3F000000u, 0x7154));
    f[2] = __int_as_float(__byte_perm(v, 0x3F000000u, 0x7254));
    f[3] = __int_as_float(__byte_perm(v, 0x3F000000u, 0x7354));
}
// The weights of an affine level map w = a*q + c, in the form levels() needs.
struct Affine {
    float a128, c;
    __device__ static Affine of(float a, float c) { return {128.0f * a, c - 128.0f * a}; }
};
__device__ __forceinline__ void dequant4(uint32_t v, Affine m, float* w) {
    levels(v, w);
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = fmaf(m.a128, w[i], m.c);
}

// Bits 0..3 of x moved to bit 4 of bytes 0..3 (the 5th bit of four 4-bit
// levels): the multiply copies bit j to bit 8j (shifts 0, 7, 14, 21 never
// collide), the mask keeps those.
__device__ __forceinline__ uint32_t fifth_bits(uint32_t x) { return ((x & 0xF) * 0x00204081u & 0x01010101u) << 4; }

constexpr uint32_t kLowNibbles = 0x0F0F0F0Fu;

// ---- legacy types: blocks of 32, units of 16 (half a block) --------------------------
// Sub-group g = 2u + s: the 4 bytes at qs[4g], whose low nibbles are weights
// 4g..4g+3 and high nibbles 16+4g.. (Q8_0: bytes 4g.. and 16+4g.., one weight each).
__device__ __forceinline__ int legacy_col(int u, int s, int h) { return 8 * u + 4 * s + 16 * h; }

struct Q8_0 {  // d, qs[32]: w = d * q
    static constexpr int kElems = 32, kBytes = 34, kAlign = 2, kUnits = 2, kSubs = 2;
    struct Unit {
        uint32_t q[4];
        float d;
    };
    __device__ static int col(int u, int s, int h) { return legacy_col(u, s, h); }
    __device__ static Unit load(const uint8_t* b, int u) {
        const uint8_t* qs = b + 2 + 8 * u;
        return {{u32_at<kAlign>(qs), u32_at<kAlign>(qs + 4), u32_at<kAlign>(qs + 16), u32_at<kAlign>(qs + 20)},
                half_at(b)};
    }
    // 8-bit levels do not fit under 1.0f: each byte, made unsigned (q + 128),
    // goes into the mantissa of 2^23 instead, which one exact subtraction removes.
    __device__ static void dequant(const Unit& un, int s, float (&w)[8]) {
        constexpr float kBase = 8388608.0f + 128.0f;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const uint32_t v = un.q[2 * h + s] ^ 0x80808080u;
#pragma unroll
            for (int i = 0; i < 4; ++i)
                w[4 * h + i] = un.d * (__int_as_float(__byte_perm(v, 0x4B000000u, 0x7540 + i)) - kBase);
        }
    }
};

// Q8_0 regrouped at upload (cuda_backend's upload_blocks), where rows are whole
// runs of 8 blocks: the 8 blocks' scales (16 bytes), then their 8 x 32 quants.
// The same 272 bytes as 8 file blocks, but 16-byte aligned with every quant
// word whole, so the GEMVs read it in 16-byte words (gemv_int8.cu). Unit u is
// unit u % 2 of block u / 2.
struct Q8_0x8 {
    static constexpr int kElems = 256, kBytes = 272, kAlign = 16, kUnits = 16, kSubs = 2;
    using Unit = Q8_0::Unit;
    __device__ static int col(int u, int s, int h) { return 32 * (u / 2) + legacy_col(u % 2, s, h); }
    __device__ static Unit load(const uint8_t* b, int u) {
        const uint8_t* qs = b + 16 + 32 * (u / 2) + 8 * (u % 2);
        return {{u32_at<kAlign>(qs), u32_at<kAlign>(qs + 4), u32_at<kAlign>(qs + 16), u32_at<kAlign>(qs + 20)},
                half_at(b + 2 * (u / 2))};
    }
    __device__ static void dequant(const Unit& un, int s, float (&w)[8]) { Q8_0::dequant(un, s, w); }
};

// Q4_0, Q4_1, Q5_0, Q5_1: [d, [m,] [qh,] qs[16]]. Q4_0: w = d*(q - 8);
// Q4_1: w = d*q + m; Q5_0: w = d*(q - 16); Q5_1: w = d*q + m, where bit j of
// qh (a little-endian u32) is the 5th bit of weight j.
template <bool kMin, bool kFifth>
struct Q45_legacy {
    static constexpr int kElems = 32, kBytes = 18 + 2 * kMin + 4 * kFifth, kAlign = kMin ? 4 * (1 + kFifth) : 2;
    static constexpr int kUnits = 2, kSubs = 2;
    struct Unit {
        uint32_t q[2];
        uint32_t qh;  // the 16 fifth bits of the unit's weights: low half then high half
        Affine m;
    };
    __device__ static int col(int u, int s, int h) { return legacy_col(u, s, h); }
    __device__ static Unit load(const uint8_t* b, int u) {
        const uint8_t* qs = b + 2 + 2 * kMin + 4 * kFifth + 8 * u;
        Unit un;
        un.q[0] = u32_at<kAlign>(qs);
        un.q[1] = u32_at<kAlign>(qs + 4);
        un.qh = 0;
        if constexpr (kFifth) {
            const uint32_t qh = u32_at<kAlign>(b + 2 + 2 * kMin);
            un.qh = (qh >> 8 * u & 0xFF) | (qh >> (16 + 8 * u) & 0xFF) << 8;
        }
        const float d = half_at(b);
        un.m = kMin ? Affine::of(d, half_at(b + 2)) : Affine::of(d, -d * (kFifth ? 16.0f : 8.0f));
        return un;
    }
    __device__ static void dequant(const Unit& un, int s, float (&w)[8]) {
        uint32_t lo = un.q[s] & kLowNibbles, hi = un.q[s] >> 4 & kLowNibbles;
        if constexpr (kFifth) {
            lo |= fifth_bits(un.qh >> 4 * s);
            hi |= fifth_bits(un.qh >> (8 + 4 * s));
        }
        dequant4(lo, un.m, w);
        dequant4(hi, un.m, w + 4);
    }
};
using Q4_0 = Q45_legacy<false, false>;
using Q4_1 = Q45_legacy<true, false>;
using Q5_0 = Q45_legacy<false, true>;
using Q5_1 = Q45_legacy<true, true>;

// ---- K types: super-blocks of 256, units of 32 ------------------------------------------

// Q4_K/Q5_K: d, dmin, scales[12], (Q5_K: qh[32]), qs[128]; w = d*sc[s] * q - dmin*m[s].
// qs[32p + l] holds weight 64p + l (low nibble, sub-block 2p) and 64p + 32 + l
// (high nibble, sub-block 2p + 1); Q5_K's 5th bit of weight i is bit i/32 of
// qh[i % 32]. Unit u: p = u/2, l = 16(u%2)..+15, 16 bytes of qs (and of qh).
template <bool kFifth>
struct Q45_K {
    static constexpr int kElems = 256, kBytes = kFifth ? 176 : 144, kAlign = 16, kUnits = 8, kSubs = 4;
    struct Unit {
        uint4 q, qh;
        Affine lo, hi;  // sub-blocks 2p and 2p + 1
        int p;
    };
    __device__ static int col(int u, int s, int h) { return 64 * (u / 2) + 32 * h + 16 * (u % 2) + 4 * s; }
    __device__ static Unit load(const uint8_t* b, int u) {
        const int p = u / 2, l = 16 * (u % 2);
        // The 16-byte head: d and dmin, then the 12 scale bytes. The 6-bit scales
        // and mins (q4k_scale_min in kernels/formats/quant.h) of sub-blocks 0..3 and 4..7,
        // four to a word, one byte each.
        const uint4 head = *reinterpret_cast<const uint4*>(b);
        const uint32_t sc = p < 2 ? head.y & 0x3F3F3F3Fu : (head.w & kLowNibbles) | (head.y >> 2 & 0x30303030u);
        const uint32_t mn = p < 2 ? head.z & 0x3F3F3F3Fu : (head.w >> 4 & kLowNibbles) | (head.z >> 2 & 0x30303030u);
        const int i = 16 * (p % 2);  // bit offset of sub-block 2p's byte in those words
        const float d = low_half(head.x), dmin = high_half(head.x);
        Unit un;
        un.lo = Affine::of(d * float(sc >> i & 0xFF), -dmin * float(mn >> i & 0xFF));
        un.hi = Affine::of(d * float(sc >> (i + 8) & 0xFF), -dmin * float(mn >> (i + 8) & 0xFF));
        un.q = *reinterpret_cast<const uint4*>(b + (kFifth ? 48 : 16) + 32 * p + l);
        if constexpr (kFifth) un.qh = *reinterpret_cast<const uint4*>(b + 16 + l);
        un.p = p;
        return un;
    }
    __device__ static void dequant(const Unit& un, int s, float (&w)[8]) {
        const uint32_t v = s == 0 ? un.q.x : s == 1 ? un.q.y : s == 2 ? un.q.z : un.q.w;
        uint32_t lo = v & kLowNibbles, hi = v >> 4 & kLowNibbles;
        if constexpr (kFifth) {
            const uint32_t qh = s == 0 ? un.qh.x : s == 1 ? un.qh.y : s == 2 ? un.qh.z : un.qh.w;
            lo |= (qh >> 2 * un.p & 0x01010101u) << 4;
            hi |= (qh >> (2 * un.p + 1) & 0x01010101u) << 4;
        }
        dequant4(lo, un.lo, w);
        dequant4(hi, un.hi, w + 4);
    }
};
using Q4_K = Q45_K<false>;
using Q5_K = Q45_K<true>;

// Q6_K: ql[128], qh[64], int8 scales[16], d; w = d*scales[i/16] * (q - 32).
// Weight i = 128h + 32k + l: low 4 bits are nibble k/2 of ql[64h + 32(k%2) + l],
// high 2 bits are bits 2k..2k+1 of qh[32h + l]. Unit u: h = u/4, c = (u/2)%2,
// l = 16(u%2)..+15; its low nibbles are k = c, its high nibbles k = c + 2, and
// each half lies in one 16-weight scale group.
struct Q6_K {  // 210 bytes in the file, padded to 224 on the device
    static constexpr int kElems = 256, kBytes = 224, kAlign = 16, kUnits = 8, kSubs = 4;
    struct Unit {
        uint32_t ql[4], qh[4];
        Affine lo, hi;
        int c;
    };
    __device__ static int col(int u, int s, int h) {
        return 128 * (u / 4) + 32 * ((u / 2) % 2) + 64 * h + 16 * (u % 2) + 4 * s;
    }
    __device__ static Unit load(const uint8_t* b, int u) {
        const int h = u / 4, c = (u / 2) % 2, l = 16 * (u % 2), first = col(u, 0, 0);
        Unit un;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            un.ql[i] = u32_at<kAlign>(b + 64 * h + 32 * c + l + 4 * i);
            un.qh[i] = u32_at<kAlign>(b + 128 + 32 * h + l + 4 * i);
        }
        const float d = half_at(b + 208);
        const float a_lo = d * float(int8_t(b[192 + first / 16])), a_hi = d * float(int8_t(b[192 + first / 16 + 4]));
        un.lo = Affine::of(a_lo, -32.0f * a_lo);
        un.hi = Affine::of(a_hi, -32.0f * a_hi);
        un.c = c;
        return un;
    }
    __device__ static void dequant(const Unit& un, int s, float (&w)[8]) {
        const uint32_t ql = un.ql[s], qh = un.qh[s];
        dequant4((ql & kLowNibbles) | (qh >> 2 * un.c & 0x03030303u) << 4, un.lo, w);
        dequant4((ql >> 4 & kLowNibbles) | (qh >> (2 * un.c + 4) & 0x03030303u) << 4, un.hi, w + 4);
    }
};

}  // namespace minfer::cuda::quant
