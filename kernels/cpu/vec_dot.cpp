// Dot products in the weight's format: activation preparation, the plain C++
// statement of the arithmetic (namespace spec), the portable tiles and the
// entry points. The AVX-512 tile kernels (namespace simd) that compute the same
// bits faster are in vec_dot_avx512.cpp.
//
// The arithmetic of one dot product, for every type: 16 float lanes
// accumulate along K, then the fixed tree of hsum adds them up.
//  - F32/F16/BF16: element k goes to lane k % 16; acc = fma(w, x, acc).
//  - 32-blocks Q5_0 and Q5_1 (Q8_0 and Q4_x are computed from panels of 16
//    rows instead, panels.h): a step is two blocks, 64 elements; lane l
//    holds the exact integer sum of elements 4l..4l+3 (lanes 0-7 the first
//    block, 8-15 the second), is converted to float and scaled:
//    acc = fma(I, dw * dx, acc). Weights are taken as unsigned (q + offset);
//    lane 0 of each block subtracts offset * sum(x).
//  - K-quants Q5_K and Q6_K (Q4_K: panels.h): a step is one block of 256;
//    lane l gathers the exact integer
//    sum of scale * q * x over elements 4l..4l+3 of each 64, then one float
//    update per block applies d (and dmin times the mins).
// Integer sums are exact, so only the float steps fix the order; they are
// the same in every tile shape.
#include "kernels/cpu/vec_dot.h"

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
#include "kernels/cpu/vec_dot_detail.h"

namespace minfer::cpu {

using vec_dot_detail::f16;
using vec_dot_detail::load;

namespace {

// Weights of 32-block types are taken as unsigned q = w / d + offset; lane 0
// of each block then adds -offset * sum(x) (the "nsum" of ActQ8Pair).
int q32_offset(GGMLType t) {
    return t == GGMLType::Q5_0 ? 16 : 0;  // Q5_1: q is already >= 0 and a min m is added instead
}
bool q32_has_min(GGMLType t) { return t == GGMLType::Q5_1; }

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

// quantize_row(Q8_K) for activations, the same bytes (a test checks): on
// AVX-512 16 values an instruction.
void quantize_q8_k(const float* x, BlockQ8_K* out, int64_t n) {
#if MINFER_AVX512
    for (int64_t blk = 0; blk < n / 256; ++blk) {
        const float* v = x + 256 * blk;
        BlockQ8_K& b = out[blk];
        __m512 amax = _mm512_setzero_ps();
        for (int c = 0; c < 16; ++c) amax = _mm512_max_ps(amax, _mm512_abs_ps(_mm512_loadu_ps(v + 16 * c)));
        b.d = _mm512_reduce_max_ps(amax) / 127.0f;
        const __m512 d = _mm512_set1_ps(b.d), half = _mm512_set1_ps(0.5f), zero = _mm512_setzero_ps();
        for (int c = 0; c < 16; ++c) {
            __m512i q = _mm512_setzero_si512();
            if (b.d != 0.0f) {
                // nearest_int: x + 0.5 (x - 0.5 below 0), truncated; then clamped to +-127.
                const __m512 t = _mm512_div_ps(_mm512_loadu_ps(v + 16 * c), d);
                const __m512 r = _mm512_add_ps(t, _mm512_mask_blend_ps(_mm512_cmp_ps_mask(t, zero, _CMP_GE_OQ),
                                                                        _mm512_sub_ps(zero, half), half));
                q = _mm512_max_epi32(_mm512_min_epi32(_mm512_cvttps_epi32(r), _mm512_set1_epi32(127)),
                                     _mm512_set1_epi32(-127));
            }
            _mm_storeu_si128(reinterpret_cast<__m128i*>(b.qs + 16 * c), _mm512_cvtsepi32_epi8(q));
            b.bsums[c] = int16_t(_mm512_reduce_add_epi32(q));
        }
    }
#else
    quantize_row(GGMLType::Q8_K, x, out, n);
#endif
}

}  // namespace

ActFormat act_format(GGMLType t) {
    switch (t) {
        case GGMLType::Q5_0: case GGMLType::Q5_1:
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
        case ActFormat::Q8_K: quantize_q8_k(x, static_cast<BlockQ8_K*>(out), n); break;
    }
}

bool has_vec_dot(GGMLType t) {
    switch (t) {
        case GGMLType::F32: case GGMLType::F16: case GGMLType::BF16: case GGMLType::Q5_0: case GGMLType::Q5_1:
        case GGMLType::Q5_K: case GGMLType::Q6_K:
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

// One block of Q5_0 or Q5_1: unsigned q (w = d * (q - offset) [+ m]).
struct Block32 {
    uint8_t q[32] = {};
    float d = 0, m = 0;
};

Block32 decode32(GGMLType t, const uint8_t* p) {
    Block32 b;
    b.d = f16(load<uint16_t>(p));
    const bool has_min = q32_has_min(t);
    if (has_min) b.m = f16(load<uint16_t>(p + 2));
    const uint8_t* qs = p + (has_min ? 4 : 2) + 4;
    const uint32_t qh = load<uint32_t>(p + (has_min ? 4 : 2));
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
        } else {  // Q5_K: w = d * sc[s] * q - dmin * m[s], 8 sub-blocks of 32
            const auto& b = *reinterpret_cast<const BlockQ5_K*>(p);
            const uint8_t* qs = b.qs;
            const uint8_t* qh = b.qh;
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

namespace {
DotTileFn lookup(GGMLType t, int rm, int rn, TileShape* shape) {
    return vec_dot_detail::avx512_lookup(t, rm, rn, shape);
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
        case GGMLType::Q5_0: return portable_pick<GGMLType::Q5_0>(rm, rn);
        case GGMLType::Q5_1: return portable_pick<GGMLType::Q5_1>(rm, rn);
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
