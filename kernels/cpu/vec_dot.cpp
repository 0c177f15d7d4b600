// Dot products in the weight's format: activation preparation, the plain C++
// statement of the arithmetic (namespace spec), and the AVX-512 tile kernels
// (namespace simd) that compute the same bits faster.
//
// The arithmetic of one dot product, for every type: 16 float lanes
// accumulate along K, then the fixed tree of hsum adds them up.
//  - F32/F16/BF16: element k goes to lane k % 16; acc = fma(w, x, acc).
//  - 32-blocks (Q8_0, Q4_x, Q5_x): a step is two blocks, 64 elements; lane l
//    holds the exact integer sum of elements 4l..4l+3 (lanes 0-7 the first
//    block, 8-15 the second), is converted to float and scaled:
//    acc = fma(I, dw * dx, acc). Weights are taken as unsigned (q + offset);
//    lane 0 of each block subtracts offset * sum(x).
//  - K-quants: a step is one block of 256; lane l gathers the exact integer
//    sum of scale * q * x over elements 4l..4l+3 of each 64, then one float
//    update per block applies d (and dmin times the mins).
// Integer sums are exact, so only the float steps fix the order; they are
// the same in every tile shape.
#include "kernels/cpu/vec_dot.h"

// GCC 12's AVX-512 headers warn about their own _mm512_undefined_*() (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels/formats/float16.h"
#include "kernels/formats/quant.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__) && \
    defined(__F16C__)
#define MINFER_AVX512 1
#else
#define MINFER_AVX512 0
#endif

namespace minfer::cpu {

namespace {

#if defined(__F16C__)
inline float f16(uint16_t h) { return _cvtsh_ss(h); }  // one instruction, the same value
#else
inline float f16(uint16_t h) { return fp16_to_f32(h); }
#endif

template <class T>
T load(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
}

// Weights of 32-block types are taken as unsigned q = w / d + offset; lane 0
// of each block then adds -offset * sum(x) (the "nsum" of ActQ8Pair).
int q32_offset(GGMLType t) {
    switch (t) {
        case GGMLType::Q8_0: return 128;
        case GGMLType::Q4_0: return 8;
        case GGMLType::Q5_0: return 16;
        default: return 0;  // Q4_1, Q5_1: q is already >= 0 and a min m is added instead
    }
}
bool q32_has_min(GGMLType t) { return t == GGMLType::Q4_1 || t == GGMLType::Q5_1; }

// ---- activation preparation ---------------------------------------------------

void quantize_q8_pairs(const float* x, ActQ8Pair* out, int64_t n) {
    const int64_t nb = n / 32;
    std::memset(static_cast<void*>(out), 0, size_t((nb + 1) / 2) * sizeof(ActQ8Pair));
    for (int64_t b = 0; b < nb; ++b) {
        const float* v = x + 32 * b;
        ActQ8Pair& p = out[b / 2];
        const int h = int(b % 2);
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(v[j]));
        const float d = amax / 127.0f, inv = d > 0 ? 1.0f / d : 0.0f;
        int32_t sum = 0;
        for (int j = 0; j < 32; ++j) {
            p.qs[32 * h + j] = int8_t(std::lrintf(v[j] * inv));
            sum += p.qs[32 * h + j];
        }
        for (int l = 0; l < 8; ++l) p.d[8 * h + l] = d;
        p.nsum[8 * h] = -sum;
    }
}

}  // namespace

ActFormat act_format(GGMLType t) {
    switch (t) {
        case GGMLType::Q8_0: case GGMLType::Q4_0: case GGMLType::Q4_1: case GGMLType::Q5_0: case GGMLType::Q5_1:
            return ActFormat::Q8_32;
        case GGMLType::Q4_K: case GGMLType::Q5_K: case GGMLType::Q6_K:
            return ActFormat::Q8_K;
        default:
            return ActFormat::F32;
    }
}

size_t act_row_bytes(ActFormat f, int64_t n) {
    size_t bytes = 0;
    switch (f) {
        case ActFormat::F32: bytes = size_t((n + 15) / 16) * 64; break;
        case ActFormat::Q8_32: bytes = size_t((n / 32 + 1) / 2) * sizeof(ActQ8Pair); break;
        case ActFormat::Q8_K: bytes = size_t(n / 256) * sizeof(BlockQ8_K); break;
    }
    return (bytes + 63) / 64 * 64;  // rows stay 64-byte aligned
}

void prepare_activations(ActFormat f, const float* x, void* out, int64_t n) {
    switch (f) {
        case ActFormat::F32:
            std::memset(out, 0, act_row_bytes(f, n));
            std::memcpy(out, x, size_t(n) * sizeof(float));
            break;
        case ActFormat::Q8_32: quantize_q8_pairs(x, static_cast<ActQ8Pair*>(out), n); break;
        case ActFormat::Q8_K: quantize_row(GGMLType::Q8_K, x, out, n); break;
    }
}

bool has_vec_dot(GGMLType t) {
    switch (t) {
        case GGMLType::F32: case GGMLType::F16: case GGMLType::BF16: case GGMLType::Q8_0: case GGMLType::Q4_0:
        case GGMLType::Q4_1: case GGMLType::Q5_0: case GGMLType::Q5_1: case GGMLType::Q4_K: case GGMLType::Q5_K:
        case GGMLType::Q6_K:
            return true;
        default:
            return false;
    }
}

// ---- the arithmetic, stated in plain C++ -------------------------------------
// Slow and portable; the build's kernels when AVX-512 is missing, and the
// definition the SIMD kernels are tested against bit for bit.

namespace spec {
namespace {

using Lanes = std::array<float, 16>;

// The reduction tree of every accumulator: lane l += lane l+8, then l+4, l+2, l+1.
float hsum(Lanes a) {
    for (int w = 8; w >= 1; w /= 2)
        for (int l = 0; l < w; ++l) a[l] += a[l + w];
    return a[0];
}

float widen(GGMLType t, const uint8_t* w, int64_t k) {
    switch (t) {
        case GGMLType::F32: return load<float>(w + 4 * k);
        case GGMLType::F16: return f16(load<uint16_t>(w + 2 * k));
        default: return bf16_to_f32(load<uint16_t>(w + 2 * k));
    }
}

float dot_float(GGMLType t, const uint8_t* w, const float* x, int64_t n) {
    Lanes acc{};
    for (int64_t k0 = 0; k0 < n; k0 += 16)
        for (int l = 0; l < 16; ++l) {
            const int64_t k = k0 + l;  // x is zero-padded to a multiple of 16
            acc[l] = std::fma(k < n ? widen(t, w, k) : 0.0f, x[k], acc[l]);
        }
    return hsum(acc);
}

// One block of a 32-block type: unsigned q (w = d * (q - offset) [+ m]).
struct Block32 {
    uint8_t q[32] = {};
    float d = 0, m = 0;
};

Block32 decode32(GGMLType t, const uint8_t* p) {
    Block32 b;
    b.d = f16(load<uint16_t>(p));
    const bool has_min = q32_has_min(t);
    if (has_min) b.m = f16(load<uint16_t>(p + 2));
    if (t == GGMLType::Q8_0) {
        for (int j = 0; j < 32; ++j) b.q[j] = uint8_t(int8_t(p[2 + j]) + 128);
        return b;
    }
    const bool fifth = t == GGMLType::Q5_0 || t == GGMLType::Q5_1;
    const uint8_t* qs = p + (has_min ? 4 : 2) + (fifth ? 4 : 0);
    const uint32_t qh = fifth ? load<uint32_t>(p + (has_min ? 4 : 2)) : 0;
    for (int j = 0; j < 16; ++j) {  // low nibbles: weights 0..15, high: 16..31
        b.q[j] = qs[j] & 0xF;
        b.q[j + 16] = qs[j] >> 4;
    }
    for (int j = 0; j < 32; ++j) b.q[j] = uint8_t(b.q[j] | (((qh >> j) & 1) << 4));
    return b;
}

float dot_q32(GGMLType t, const uint8_t* w, const ActQ8Pair* x, int64_t n) {
    const int64_t nb = n / 32;
    const size_t bytes = ggml_row_bytes(t, 32);
    const int32_t offset = q32_offset(t);
    Lanes acc{};
    for (int64_t p = 0; 2 * p < nb; ++p) {
        Block32 b[2];  // an odd block count leaves the second one zero
        for (int h = 0; h < 2 && 2 * p + h < nb; ++h) b[h] = decode32(t, w + size_t(2 * p + h) * bytes);
        const ActQ8Pair& a = x[p];
        for (int l = 0; l < 16; ++l) {
            const Block32& wb = b[l / 8];
            int32_t sum = offset * a.nsum[l];
            for (int e = 4 * l; e < 4 * l + 4; ++e) sum += int32_t(wb.q[e % 32]) * a.qs[e];
            acc[l] = std::fma(float(sum), wb.d * a.d[l], acc[l]);
            if (q32_has_min(t)) acc[l] = std::fma(-wb.m, float(a.nsum[l]) * a.d[l], acc[l]);
        }
    }
    return hsum(acc);
}

float dot_k(GGMLType t, const uint8_t* w, const BlockQ8_K* x, int64_t n) {
    const size_t bytes = ggml_row_bytes(t, 256);
    Lanes acc{};
    for (int64_t blk = 0; blk < n / 256; ++blk) {
        const uint8_t* p = w + size_t(blk) * bytes;
        const BlockQ8_K& a = x[blk];
        uint8_t q[256];   // unsigned quants
        int32_t sc[256];  // the scale of each element's sub-block
        int32_t sum[16] = {};
        if (t == GGMLType::Q6_K) {  // w = d * scales[e / 16] * (q - 32)
            const auto& b = *reinterpret_cast<const BlockQ6_K*>(p);
            for (int e = 0; e < 256; ++e) {
                const int h = e / 128, r = e % 128;
                const int lo = (b.ql[64 * h + r % 64] >> (4 * (r / 64))) & 0xF;
                const int hi = (b.qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
                q[e] = uint8_t(lo | (hi << 4));
                sc[e] = b.scales[e / 16];
            }
            for (int e = 0; e < 256; ++e) sum[(e % 64) / 4] += sc[e] * q[e] * a.qs[e];
            for (int l = 0; l < 8; ++l)
                sum[l] -= 32 * (b.scales[2 * l] * a.bsums[2 * l] + b.scales[2 * l + 1] * a.bsums[2 * l + 1]);
            const float d = f16(b.d) * a.d;
            for (int l = 0; l < 16; ++l) acc[l] = std::fma(float(sum[l]), d, acc[l]);
        } else {  // Q4_K, Q5_K: w = d * sc[s] * q - dmin * m[s], 8 sub-blocks of 32
            const auto& b = *reinterpret_cast<const BlockQ4_K*>(p);  // Q5_K starts the same way
            const uint8_t* qs = t == GGMLType::Q5_K ? reinterpret_cast<const BlockQ5_K*>(p)->qs : b.qs;
            const uint8_t* qh = t == GGMLType::Q5_K ? reinterpret_cast<const BlockQ5_K*>(p)->qh : nullptr;
            uint8_t s8[8], m8[8];
            for (int s = 0; s < 8; ++s) q4k_scale_min(b.scales, s, s8[s], m8[s]);
            for (int e = 0; e < 256; ++e) {
                const int c = e / 64, r = e % 64, s = e / 32;
                q[e] = uint8_t((qs[32 * c + r % 32] >> (r < 32 ? 0 : 4)) & 0xF);
                if (qh) q[e] = uint8_t(q[e] | (((qh[r % 32] >> s) & 1) << 4));
                sc[e] = s8[s];
            }
            for (int e = 0; e < 256; ++e) sum[(e % 64) / 4] += sc[e] * q[e] * a.qs[e];
            int32_t mins[16] = {};
            for (int l = 0; l < 8; ++l) mins[l] = m8[l] * (a.bsums[2 * l] + a.bsums[2 * l + 1]);
            const float d = f16(b.d), dmin = f16(b.dmin);
            for (int l = 0; l < 16; ++l)
                acc[l] = std::fma(std::fma(float(sum[l]), d, -(float(mins[l]) * dmin)), a.d, acc[l]);
        }
    }
    return hsum(acc);
}

}  // namespace

float dot(GGMLType t, const void* w, const void* act, int64_t n) {
    const auto* wb = static_cast<const uint8_t*>(w);
    switch (act_format(t)) {
        case ActFormat::F32: return dot_float(t, wb, static_cast<const float*>(act), n);
        case ActFormat::Q8_32: return dot_q32(t, wb, static_cast<const ActQ8Pair*>(act), n);
        case ActFormat::Q8_K: return dot_k(t, wb, static_cast<const BlockQ8_K*>(act), n);
    }
    return 0;
}

}  // namespace spec

#if MINFER_AVX512
// ---- AVX-512 tiles ----------------------------------------------------------------
//
// tile<T, RM, RN> keeps RM x RN accumulators in registers. Each step loads
// (and decodes) one piece of each of the RN weight rows once and uses it for
// all RM activation rows: RM + RN loads feed RM x RN multiply-adds. A type T
// says what a step is:
//   steps(n)              number of steps along K
//   block(w, s, n)        per weight row and step: scales, tail mask...
//   chunk(w, block, s, c) per weight row and sub-step c < kChunks: the vector
//   madd(acc, chunk, x, s, c)   the multiply-add of one activation row
//   end_block(acc, block, x, s) per step: apply the block's float scales
//   result(acc)           the 16 lanes to sum

namespace simd {
namespace {

// The tree of spec::hsum for four vectors at once, in registers: each level
// pairs every live lane with its partner (a blend and one shuffle bring the
// partners together) and packs two vectors' results into one.
// Returns [hsum(a), hsum(b), hsum(c), hsum(d)] bit for bit.
inline __m128 hsum4(__m512 a, __m512 b, __m512 c, __m512 d) {
    // l + l+8: [a's 8 | b's 8], [c's 8 | d's 8]
    const __m512 ab = _mm512_add_ps(_mm512_mask_blend_ps(0xFF00, a, b), _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 3, 2)));
    const __m512 cd = _mm512_add_ps(_mm512_mask_blend_ps(0xFF00, c, d), _mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(1, 0, 3, 2)));
    // l + l+4: one vector per 128-bit lane, [a's 4 | c's 4 | b's 4 | d's 4]
    const __m512i partner = _mm512_setr_epi32(4, 5, 6, 7, 16, 17, 18, 19, 12, 13, 14, 15, 24, 25, 26, 27);
    __m512 v = _mm512_add_ps(_mm512_mask_blend_ps(0xF0F0, ab, cd), _mm512_permutex2var_ps(ab, partner, cd));
    v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));  // l + l+2
    v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));  // l + l+1
    return _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_setr_epi32(0, 8, 4, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), v));
}

// Two f16 scales spread over lanes 0-7 and 8-15.
inline __m512 two_scales(uint16_t d0, uint16_t d1) {
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16(short(d0))),
                                                   _mm_set1_epi16(short(d1)), 1));
}

inline __m512i lo_hi_nibbles(__m256i v) {  // [v & 15 | v >> 4]
    return _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(v), _mm256_srli_epi16(v, 4), 1),
                            _mm512_set1_epi8(0x0F));
}

// ---- F32, F16, BF16 -------------------------------------------------------------

template <GGMLType kType>
struct FloatRows {
    static constexpr int kRM = 6, kRN = 4, kChunks = 1;
    using Acc = __m512;
    using Chunk = __m512;
    struct Block {
        __mmask16 mask;  // elements left in this step
    };
    static constexpr size_t kElemBytes = kType == GGMLType::F32 ? 4 : 2;
    static constexpr size_t kStepBytes = 16 * kElemBytes;

    static Acc zero() { return _mm512_setzero_ps(); }
    static int64_t steps(int64_t n) { return (n + 15) / 16; }
    static Block block(const uint8_t*, int64_t s, int64_t n) {
        const int64_t left = n - 16 * s;
        return {__mmask16(left >= 16 ? 0xFFFF : (1u << left) - 1)};
    }
    static __m512 chunk(const uint8_t* w, Block b, int64_t s, int) {
        const uint8_t* p = w + 16 * s * kElemBytes;
        if constexpr (kType == GGMLType::F32) {
            return b.mask == 0xFFFF ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(b.mask, p);
        } else {
            const __m256i h = b.mask == 0xFFFF ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))
                                                : _mm256_maskz_loadu_epi16(b.mask, p);
            if constexpr (kType == GGMLType::F16) return _mm512_cvtph_ps(h);
            // bf16 is the top half of a float.
            return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
        }
    }
    static void madd(Acc& acc, __m512 w, const uint8_t* x, int64_t s, int) {
        acc = _mm512_fmadd_ps(w, _mm512_loadu_ps(reinterpret_cast<const float*>(x) + 16 * s), acc);
    }
    static void end_block(Acc&, Block, const uint8_t*, int64_t) {}
    static __m512 result(Acc a) { return a; }
};

// ---- 32-blocks: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 ----------------------------------------

template <GGMLType kType>
struct Q32Rows {
    static constexpr int kRM = 4, kRN = 4, kChunks = 1;
    static constexpr bool kMin = kType == GGMLType::Q4_1 || kType == GGMLType::Q5_1;
    static constexpr bool kFifth = kType == GGMLType::Q5_0 || kType == GGMLType::Q5_1;
    // Block layout: f16 d, [f16 m], [u32 qh], qs.
    static constexpr size_t kQh = kMin ? 4 : 2;
    static constexpr size_t kQs = kQh + (kFifth ? 4 : 0);
    static constexpr size_t kBytes = kType == GGMLType::Q8_0 ? 34 : kQs + 16;
    static constexpr size_t kStepBytes = 2 * kBytes;
    // offset = 1 << kShift (see q32_offset); 0 for the types with a min.
    static constexpr int kShift = kType == GGMLType::Q8_0 ? 7 : kType == GGMLType::Q4_0 ? 3 : kType == GGMLType::Q5_0 ? 4 : 0;
    using Acc = __m512;
    struct Block {
        bool pair;  // false: the row's last, odd block
    };
    struct Chunk {
        __m512i q;  // 64 unsigned quants
        __m512 d, m;
    };

    static Acc zero() { return _mm512_setzero_ps(); }
    static int64_t steps(int64_t n) { return (n / 32 + 1) / 2; }
    static Block block(const uint8_t*, int64_t s, int64_t n) { return {2 * s + 1 < n / 32}; }
    static Chunk chunk(const uint8_t* w, Block b, int64_t s, int) {
        const uint8_t* p0 = w + 2 * s * kBytes;
        const uint8_t* p1 = p0 + kBytes;  // read only if b.pair
        Chunk c;
        c.d = two_scales(load<uint16_t>(p0), b.pair ? load<uint16_t>(p1) : 0);
        if constexpr (kMin) c.m = two_scales(load<uint16_t>(p0 + 2), b.pair ? load<uint16_t>(p1 + 2) : 0);
        if constexpr (kType == GGMLType::Q8_0) {
            const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p0 + 2));
            const __m256i hi = b.pair ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p1 + 2)) : _mm256_setzero_si256();
            // int8 -> unsigned q + 128: flip the sign bit.
            c.q = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), _mm512_set1_epi8(char(0x80)));
        } else {
            // [blk0 qs | blk1 qs] -> nibbles [blk0 lo | blk1 lo | blk0 hi | blk1 hi] -> block order.
            const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p0 + kQs));
            const __m128i q1 = b.pair ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(p1 + kQs)) : _mm_setzero_si128();
            const __m512i z = lo_hi_nibbles(_mm256_inserti128_si256(_mm256_castsi128_si256(q0), q1, 1));
            c.q = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));
            if constexpr (kFifth) {  // bit j of qh: the 5th bit of weight j
                const uint64_t qh = load<uint32_t>(p0 + kQh) | (b.pair ? uint64_t(load<uint32_t>(p1 + kQh)) << 32 : 0);
                c.q = _mm512_or_si512(c.q, _mm512_maskz_mov_epi8(__mmask64(qh), _mm512_set1_epi8(16)));
            }
        }
        return c;
    }
    static void madd(Acc& acc, const Chunk& c, const uint8_t* x, int64_t s, int) {
        const ActQ8Pair& a = reinterpret_cast<const ActQ8Pair*>(x)[s];
        const __m512 xd = _mm512_loadu_ps(a.d);
        const __m512i nsum = _mm512_loadu_si512(a.nsum);
        // u8 x s8 -> int32 lanes, starting from -offset * sum(x) in lanes 0 and 8.
        const __m512i corr = kShift ? _mm512_slli_epi32(nsum, kShift) : _mm512_setzero_si512();
        const __m512i sum = _mm512_dpbusd_epi32(corr, c.q, _mm512_loadu_si512(a.qs));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(c.d, xd), acc);
        if constexpr (kMin) acc = _mm512_fnmadd_ps(c.m, _mm512_mul_ps(_mm512_cvtepi32_ps(nsum), xd), acc);
    }
    static void end_block(Acc&, Block, const uint8_t*, int64_t) {}
    static __m512 result(Acc a) { return a; }
};

// ---- K-quants: Q4_K, Q5_K, Q6_K ----------------------------------------------------
// A step is a block of 256 in 4 chunks of 64. maddubs makes int16 pairs of
// q * x, dpwssd multiplies them by the sub-block scale into int32 lanes: the
// block's integer sum stays exact until end_block converts it once.

struct KAcc {
    __m512i sum;  // this block's exact integer sums
    __m512 f;     // the float accumulator
};

struct KChunk {
    __m512i q;   // 64 unsigned quants
    __m512i sc;  // the scale of each int16 pair of them
};

// Per chunk c, which of the 8 sub-block scales each int16 lane takes.
inline __m512i q4k_scale_index(int c) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(short(2 * c))), _mm256_set1_epi16(short(2 * c + 1)), 1);
}

template <GGMLType kType>
struct Q45KRows {
    static constexpr int kRM = 6, kRN = 3, kChunks = 4;
    static constexpr bool kFifth = kType == GGMLType::Q5_K;
    using Acc = KAcc;
    using B = std::conditional_t<kFifth, BlockQ5_K, BlockQ4_K>;
    static constexpr size_t kStepBytes = sizeof(B);
    struct Block {
        __m128i sc;    // 8 scales as int16
        __m256i mins;  // m[s] in int16 lanes 2s and 2s+1, against bsums
        __m512i qh;    // Q5_K: the 32 bytes of 5th bits, twice
        float d, dmin;
    };
    using Chunk = KChunk;

    static Acc zero() { return {_mm512_setzero_si512(), _mm512_setzero_ps()}; }
    static int64_t steps(int64_t n) { return n / 256; }
    static Block block(const uint8_t* w, int64_t s, int64_t) {
        const B& b = reinterpret_cast<const B*>(w)[s];
        // Unpack the 6-bit scales and mins (see q4k_scale_min) four at a time:
        // afterwards the bytes of u[0..1] are sc[0..7], of u[2..3] m[0..7].
        uint32_t u[4];
        std::memcpy(u, b.scales, 12);
        const uint32_t m3f = 0x3f3f3f3f, m0f = 0x0f0f0f0f, m03 = 0x03030303;
        u[3] = ((u[2] >> 4) & m0f) | (((u[1] >> 6) & m03) << 4);
        const uint32_t m_lo = u[1] & m3f;
        u[1] = (u[2] & m0f) | (((u[0] >> 6) & m03) << 4);
        u[2] = m_lo;
        u[0] &= m3f;
        const __m128i sm = _mm_setr_epi32(int(u[0]), int(u[1]), int(u[2]), int(u[3]));
        Block blk;
        blk.sc = _mm_cvtepu8_epi16(sm);
        blk.mins = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));
        if constexpr (kFifth) blk.qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh)));
        blk.d = f16(b.d);
        blk.dmin = f16(b.dmin);
        return blk;
    }
    static Chunk chunk(const uint8_t* w, const Block& blk, int64_t s, int c) {
        const B& b = reinterpret_cast<const B*>(w)[s];
        __m512i q = lo_hi_nibbles(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * c)));
        if constexpr (kFifth) {  // bit 2c of qh[l] for the low nibbles, 2c+1 for the high
            const __m512i bit = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi8(char(1 << (2 * c)))),
                                                   _mm256_set1_epi8(char(1 << (2 * c + 1))), 1);
            q = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(blk.qh, bit), q, _mm512_set1_epi8(16));
        }
        return {q, _mm512_permutexvar_epi16(q4k_scale_index(c), _mm512_castsi128_si512(blk.sc))};
    }
    static void madd(Acc& acc, const Chunk& c, const uint8_t* x, int64_t s, int ci) {
        const BlockQ8_K& a = reinterpret_cast<const BlockQ8_K*>(x)[s];
        const __m512i xq = _mm512_loadu_si512(a.qs + 64 * ci);
        acc.sum = _mm512_dpwssd_epi32(acc.sum, _mm512_maddubs_epi16(c.q, xq), c.sc);
    }
    static void end_block(Acc& acc, const Block& blk, const uint8_t* x, int64_t s) {
        const BlockQ8_K& a = reinterpret_cast<const BlockQ8_K*>(x)[s];
        // m[l] * (bsums[2l] + bsums[2l+1]) in lanes 0-7.
        const __m256i mins = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums)), blk.mins);
        const __m512 t = _mm512_fmsub_ps(_mm512_cvtepi32_ps(acc.sum), _mm512_set1_ps(blk.d),
                                         _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_zextsi256_si512(mins)), _mm512_set1_ps(blk.dmin)));
        acc.f = _mm512_fmadd_ps(t, _mm512_set1_ps(a.d), acc.f);
        acc.sum = _mm512_setzero_si512();
    }
    static __m512 result(const Acc& a) { return a.f; }
};

struct Q6KRows {
    static constexpr int kRM = 6, kRN = 3, kChunks = 4;
    static constexpr size_t kStepBytes = sizeof(BlockQ6_K);
    using Acc = KAcc;
    struct Block {
        __m256i sc;  // 16 scales as int16
        float d;
    };
    using Chunk = KChunk;

    static Acc zero() { return {_mm512_setzero_si512(), _mm512_setzero_ps()}; }
    static int64_t steps(int64_t n) { return n / 256; }
    static Block block(const uint8_t* w, int64_t s, int64_t) {
        const BlockQ6_K& b = reinterpret_cast<const BlockQ6_K*>(w)[s];
        return {_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales))), f16(b.d)};
    }
    // Chunk c = 2h + half holds elements 128h + 64half + 0..63: low 4 bits from
    // ql[64h..64h+63] (low nibbles for half 0, high for 1), 2 high bits from
    // qh[32h..32h+31] at bit 4half (first 32) and 4half + 2 (last 32).
    static Chunk chunk(const uint8_t* w, const Block& blk, int64_t s, int c) {
        const BlockQ6_K& b = reinterpret_cast<const BlockQ6_K*>(w)[s];
        const int h = c / 2, half = c % 2;
        __m512i lo = _mm512_loadu_si512(b.ql + 64 * h);
        if (half) lo = _mm512_srli_epi16(lo, 4);
        lo = _mm512_and_si512(lo, _mm512_set1_epi8(0x0F));
        const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h)));
        const __m512i shift = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(short(4 * half))),
                                                 _mm256_set1_epi16(short(4 * half + 2)), 1);
        const __m512i hi = _mm512_and_si512(_mm512_srlv_epi16(qh, shift), _mm512_set1_epi8(3));
        const __m512i q = _mm512_or_si512(lo, _mm512_slli_epi16(hi, 4));
        // int16 lane i (elements 2i, 2i+1) takes the scale of group 4c + i / 8.
        alignas(64) static constexpr int16_t kGroup[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                                           2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
        const __m512i idx = _mm512_add_epi16(_mm512_set1_epi16(short(4 * c)), _mm512_load_si512(kGroup));
        return {q, _mm512_permutexvar_epi16(idx, _mm512_castsi256_si512(blk.sc))};
    }
    static void madd(Acc& acc, const Chunk& c, const uint8_t* x, int64_t s, int ci) {
        const BlockQ8_K& a = reinterpret_cast<const BlockQ8_K*>(x)[s];
        acc.sum = _mm512_dpwssd_epi32(acc.sum, _mm512_maddubs_epi16(c.q, _mm512_loadu_si512(a.qs + 64 * ci)), c.sc);
    }
    static void end_block(Acc& acc, const Block& blk, const uint8_t* x, int64_t s) {
        const BlockQ8_K& a = reinterpret_cast<const BlockQ8_K*>(x)[s];
        // q is unsigned (q - 32 is the weight): subtract 32 * sum of scale * bsums.
        const __m256i corr = _mm256_madd_epi16(blk.sc, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums)));
        const __m512i sum = _mm512_sub_epi32(acc.sum, _mm512_zextsi256_si512(_mm256_slli_epi32(corr, 5)));
        acc.f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(blk.d * a.d), acc.f);
        acc.sum = _mm512_setzero_si512();
    }
    static __m512 result(const Acc& a) { return a.f; }
};

// ---- the tile -------------------------------------------------------------------------

// The accumulators stay in registers only if the loops over the tile's rows
// and columns are fully unrolled; GCC needs to be told.
#define UNROLL _Pragma("GCC unroll 16")

template <class T, int RM, int RN>
void tile(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t n, float* out, int64_t ldo) {
    static_assert(RN <= 4);
    typename T::Acc acc[RM][RN];
    UNROLL for (int i = 0; i < RM; ++i)
        UNROLL for (int j = 0; j < RN; ++j) acc[i][j] = T::zero();

    for (int64_t s = 0; s < T::steps(n); ++s) {
        if constexpr (RM == 1) {
            // Decode streams the weights from memory: ask for the next tile's
            // rows (RN rows on, same offset) one tile ahead. With the hardware
            // prefetchers alone, decode was up to 1.5x slower.
            UNROLL for (int j = 0; j < RN; ++j)
                for (size_t b = 0; b < T::kStepBytes; b += 64)
                    _mm_prefetch(reinterpret_cast<const char*>(w + (j + RN) * ws + s * T::kStepBytes + b), _MM_HINT_T0);
        }
        typename T::Block blk[RN];
        UNROLL for (int j = 0; j < RN; ++j) blk[j] = T::block(w + j * ws, s, n);
        UNROLL for (int c = 0; c < T::kChunks; ++c) {
            typename T::Chunk wc[RN];  // loaded once, used by all RM rows
            UNROLL for (int j = 0; j < RN; ++j) wc[j] = T::chunk(w + j * ws, blk[j], s, c);
            UNROLL for (int i = 0; i < RM; ++i)
                UNROLL for (int j = 0; j < RN; ++j) T::madd(acc[i][j], wc[j], x + i * xs, s, c);
        }
        UNROLL for (int i = 0; i < RM; ++i)
            UNROLL for (int j = 0; j < RN; ++j) T::end_block(acc[i][j], blk[j], x + i * xs, s);
    }

    // The horizontal sums, one row of the tile at a time.
    UNROLL for (int i = 0; i < RM; ++i) {
        __m512 v[4] = {};
        UNROLL for (int j = 0; j < RN; ++j) v[j] = T::result(acc[i][j]);
        const __m128 sums = hsum4(v[0], v[1], v[2], v[3]);
        if constexpr (RN == 4)
            _mm_storeu_ps(out + i * ldo, sums);
        else
            _mm_mask_storeu_ps(out + i * ldo, __mmask8((1 << RN) - 1), sums);
    }
}

#undef UNROLL

// fns[rm - 1][rn - 1] = tile<T, rm, rn>.
template <class T>
struct TileTable {
    DotTileFn fns[T::kRM][T::kRN];
    template <int... I>
    constexpr TileTable(std::integer_sequence<int, I...>) : fns{} {
        ((fns[I / T::kRN][I % T::kRN] = &tile<T, I / T::kRN + 1, I % T::kRN + 1>), ...);
    }
    constexpr TileTable() : TileTable(std::make_integer_sequence<int, T::kRM * T::kRN>{}) {}
};

template <class T>
DotTileFn pick(int rm, int rn, TileShape* shape) {
    static constexpr TileTable<T> table;
    if (shape) *shape = {T::kRM, T::kRN};
    return rm >= 1 && rm <= T::kRM && rn >= 1 && rn <= T::kRN ? table.fns[rm - 1][rn - 1] : nullptr;
}

}  // namespace
}  // namespace simd

namespace {
DotTileFn lookup(GGMLType t, int rm, int rn, TileShape* shape) {
    using namespace simd;
    switch (t) {
        case GGMLType::F32: return pick<FloatRows<GGMLType::F32>>(rm, rn, shape);
        case GGMLType::F16: return pick<FloatRows<GGMLType::F16>>(rm, rn, shape);
        case GGMLType::BF16: return pick<FloatRows<GGMLType::BF16>>(rm, rn, shape);
        case GGMLType::Q8_0: return pick<Q32Rows<GGMLType::Q8_0>>(rm, rn, shape);
        case GGMLType::Q4_0: return pick<Q32Rows<GGMLType::Q4_0>>(rm, rn, shape);
        case GGMLType::Q4_1: return pick<Q32Rows<GGMLType::Q4_1>>(rm, rn, shape);
        case GGMLType::Q5_0: return pick<Q32Rows<GGMLType::Q5_0>>(rm, rn, shape);
        case GGMLType::Q5_1: return pick<Q32Rows<GGMLType::Q5_1>>(rm, rn, shape);
        case GGMLType::Q4_K: return pick<Q45KRows<GGMLType::Q4_K>>(rm, rn, shape);
        case GGMLType::Q5_K: return pick<Q45KRows<GGMLType::Q5_K>>(rm, rn, shape);
        case GGMLType::Q6_K: return pick<Q6KRows>(rm, rn, shape);
        default: throw std::invalid_argument(std::string("dot_tile: no dot product for ") + ggml_type_name(t));
    }
}
}  // namespace

#else  // no AVX-512: every tile is its elements, one spec::dot each

namespace {
constexpr int kPortableRM = 4, kPortableRN = 4;

template <GGMLType kType, int RM, int RN>
void portable_tile(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t n, float* out, int64_t ldo) {
    for (int i = 0; i < RM; ++i)
        for (int j = 0; j < RN; ++j) out[i * ldo + j] = spec::dot(kType, w + j * ws, x + i * xs, n);
}

template <GGMLType kType>
DotTileFn portable_pick(int rm, int rn) {
    static constexpr DotTileFn fns[kPortableRM][kPortableRN] = {
        {portable_tile<kType, 1, 1>, portable_tile<kType, 1, 2>, portable_tile<kType, 1, 3>, portable_tile<kType, 1, 4>},
        {portable_tile<kType, 2, 1>, portable_tile<kType, 2, 2>, portable_tile<kType, 2, 3>, portable_tile<kType, 2, 4>},
        {portable_tile<kType, 3, 1>, portable_tile<kType, 3, 2>, portable_tile<kType, 3, 3>, portable_tile<kType, 3, 4>},
        {portable_tile<kType, 4, 1>, portable_tile<kType, 4, 2>, portable_tile<kType, 4, 3>, portable_tile<kType, 4, 4>}};
    return rm >= 1 && rm <= kPortableRM && rn >= 1 && rn <= kPortableRN ? fns[rm - 1][rn - 1] : nullptr;
}

DotTileFn lookup(GGMLType t, int rm, int rn, TileShape* shape) {
    if (shape) *shape = {kPortableRM, kPortableRN};
    switch (t) {
        case GGMLType::F32: return portable_pick<GGMLType::F32>(rm, rn);
        case GGMLType::F16: return portable_pick<GGMLType::F16>(rm, rn);
        case GGMLType::BF16: return portable_pick<GGMLType::BF16>(rm, rn);
        case GGMLType::Q8_0: return portable_pick<GGMLType::Q8_0>(rm, rn);
        case GGMLType::Q4_0: return portable_pick<GGMLType::Q4_0>(rm, rn);
        case GGMLType::Q4_1: return portable_pick<GGMLType::Q4_1>(rm, rn);
        case GGMLType::Q5_0: return portable_pick<GGMLType::Q5_0>(rm, rn);
        case GGMLType::Q5_1: return portable_pick<GGMLType::Q5_1>(rm, rn);
        case GGMLType::Q4_K: return portable_pick<GGMLType::Q4_K>(rm, rn);
        case GGMLType::Q5_K: return portable_pick<GGMLType::Q5_K>(rm, rn);
        case GGMLType::Q6_K: return portable_pick<GGMLType::Q6_K>(rm, rn);
        default: throw std::invalid_argument(std::string("dot_tile: no dot product for ") + ggml_type_name(t));
    }
}
}  // namespace

#endif

TileShape tile_shape(GGMLType t) {
    TileShape s{};
    lookup(t, 1, 1, &s);
    return s;
}

DotTileFn dot_tile_fn(GGMLType t, int rm, int rn) {
    const DotTileFn fn = lookup(t, rm, rn, nullptr);
    if (!fn) throw std::invalid_argument("dot_tile: tile larger than tile_shape");
    return fn;
}

float vec_dot(GGMLType t, const void* w_row, const void* act, int64_t n) {
    float out;
    dot_tile_fn(t, 1, 1)(static_cast<const uint8_t*>(w_row), 0, static_cast<const uint8_t*>(act), 0, n, &out, 1);
    return out;
}

float vec_dot_spec(GGMLType t, const void* w_row, const void* act, int64_t n) {
    if (!has_vec_dot(t)) throw std::invalid_argument(std::string("vec_dot: no dot product for ") + ggml_type_name(t));
    return spec::dot(t, w_row, act, n);
}

}  // namespace minfer::cpu
