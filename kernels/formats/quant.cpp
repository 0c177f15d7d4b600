// Reference dequantizers and quantizers for the GGUF block formats (quant.h).
//
// Decoders follow the layouts in ../shared/docs/gguf-notes.md and compute each
// weight with the same float operations, in the same order, as gguf-py's numpy
// decoders (e.g. (d*sc)*q - dmin*m), so the two agree bit for bit.
//
// Quantizers are our own. The legacy types use the plain rules: absmax for
// Q8_0, the signed extreme mapped to the most negative level for Q4_0/Q5_0,
// min/max for Q4_1/Q5_1. The K types search for good sub-block scales; see
// "K-quants" below. Every quantizer rounds its scales to f16 *first* and then
// picks the integer levels against the rounded scale, because that is the
// scale the decoder will use.
#include "kernels/formats/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/formats/float16.h"

namespace minfer {

namespace {

// ---- small helpers ------------------------------------------------------------

// Round half away from zero (the cast truncates). The clamp keeps absurd
// ratios from overflowing int; all callers clamp to a few levels anyway.
int nearest_int(float x) {
    x = std::clamp(x, -1e9f, 1e9f);
    return static_cast<int>(x + (x >= 0.0f ? 0.5f : -0.5f));
}
int clampi(int v, int lo, int hi) { return std::min(std::max(v, lo), hi); }

// f32 -> f16 bits, saturating at the largest finite half (65504) so that
// unusually large input degrades instead of producing inf scales.
uint16_t to_half(float f) {
    constexpr float kMaxHalf = 65504.0f;
    return f32_to_fp16(std::clamp(f, -kMaxHalf, kMaxHalf));
}
float half(uint16_t h) { return fp16_to_f32(h); }

// Directed rounding to f16, for scales that must not shrink: the K types
// round d up so the largest sub-block scale still fits in 6 (8) bits.
uint16_t half_up(float f) {  // the least half >= f (up to saturation at 65504)
    const uint16_t h = to_half(f);
    if (half(h) >= f || h == 0x7bff) return h;
    if (h & 0x8000) return (h & 0x7fff) == 0 ? uint16_t{0x0001} : static_cast<uint16_t>(h - 1);
    return static_cast<uint16_t>(h + 1);
}
uint16_t half_down(float f) { return static_cast<uint16_t>(half_up(-f) ^ 0x8000); }

// The f16 for a block scale d chosen so that the extreme weight sits `levels`
// steps from the origin: the nearest half, unless that is so much smaller
// than d that the extreme would round past the last level (only possible for
// subnormal halves, whose relative step reaches 50%); then the next half away
// from zero.
uint16_t scale_half(float d, float levels) {
    const uint16_t h = to_half(d);
    if (d == 0.0f || std::fabs(d) * levels < (levels + 0.5f) * std::fabs(half(h))) return h;
    return d > 0 ? half_up(d) : half_down(d);
}

// The value of largest magnitude, with its sign.
float signed_absmax(const float* x, int n) {
    float m = 0.0f;
    for (int i = 0; i < n; ++i)
        if (std::fabs(x[i]) > std::fabs(m)) m = x[i];
    return m;
}

// Weight j of a 32-weight block with 4-bit levels: byte j%16, low nibble for
// the first half, high nibble for the second.
int nibble32(const uint8_t* qs, int j) { return j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4); }
void set_nibble32(uint8_t* qs, int j, int q) {
    if (j < 16) qs[j] = static_cast<uint8_t>((qs[j] & 0xF0) | q);
    else qs[j - 16] = static_cast<uint8_t>((qs[j - 16] & 0x0F) | (q << 4));
}

// Q5_0/Q5_1: the 5th bits of the 32 weights form a little-endian u32.
uint32_t load_u32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
void store_u32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }

// ---- legacy 32-weight blocks ------------------------------------------------------

void dequant_q8_0(const BlockQ8_0& b, float* y) {
    const float d = half(b.d);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
}
void quant_q8_0(const float* x, BlockQ8_0& b) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    b.d = scale_half(amax / 127.0f, 127.0f);
    const float d = half(b.d);
    for (int j = 0; j < kQK; ++j) b.qs[j] = static_cast<int8_t>(d == 0.0f ? 0 : clampi(nearest_int(x[j] / d), -127, 127));
}

// Q4_0/Q5_0 are symmetric with one more negative level than positive (-8..7,
// -16..15). Mapping the signed extreme to the most negative level uses that
// extra level: the extreme is exact and the other side clips at 7/8 of it.
void dequant_q4_0(const BlockQ4_0& b, float* y) {
    const float d = half(b.d);
    for (int j = 0; j < kQK; ++j) y[j] = d * static_cast<float>(nibble32(b.qs, j) - 8);
}
void quant_q4_0(const float* x, BlockQ4_0& b) {
    b.d = scale_half(signed_absmax(x, kQK) / -8.0f, 8.0f);
    const float d = half(b.d);
    for (int j = 0; j < kQK; ++j) set_nibble32(b.qs, j, d == 0.0f ? 8 : clampi(nearest_int(x[j] / d) + 8, 0, 15));
}

void dequant_q5_0(const BlockQ5_0& b, float* y) {
    const float d = half(b.d);
    const uint32_t qh = load_u32(b.qh);
    for (int j = 0; j < kQK; ++j) {
        const int q = nibble32(b.qs, j) | static_cast<int>(((qh >> j) & 1) << 4);
        y[j] = d * static_cast<float>(q - 16);
    }
}
void quant_q5_0(const float* x, BlockQ5_0& b) {
    b.d = scale_half(signed_absmax(x, kQK) / -16.0f, 16.0f);
    const float d = half(b.d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK; ++j) {
        const int q = d == 0.0f ? 16 : clampi(nearest_int(x[j] / d) + 16, 0, 31);
        set_nibble32(b.qs, j, q & 0xF);
        qh |= static_cast<uint32_t>(q >> 4) << j;
    }
    store_u32(b.qh, qh);
}

// Q4_1/Q5_1: w = d*q + m with m the block minimum and d spanning max - min.
// d spans max - m with m the f16-rounded min; weights that the rounding of m
// left just below it clamp to level 0 (an error under half an f16 ulp of m).
void dequant_q4_1(const BlockQ4_1& b, float* y) {
    const float d = half(b.d), m = half(b.m);
    for (int j = 0; j < kQK; ++j) y[j] = d * static_cast<float>(nibble32(b.qs, j)) + m;
}
void minmax(const float* x, int n, float& lo, float& hi) {
    lo = hi = x[0];
    for (int i = 1; i < n; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
}
// Sets b.m to the block minimum and b.d to the step of `top` levels above it.
template <class Block>
void set_min_and_step(const float* x, Block& b, float top) {
    float lo, hi;
    minmax(x, kQK, lo, hi);
    b.m = to_half(lo);
    b.d = scale_half((hi - half(b.m)) / top, top);
}
void quant_q4_1(const float* x, BlockQ4_1& b) {
    set_min_and_step(x, b, 15.0f);
    const float d = half(b.d), m = half(b.m);
    for (int j = 0; j < kQK; ++j) set_nibble32(b.qs, j, d == 0.0f ? 0 : clampi(nearest_int((x[j] - m) / d), 0, 15));
}

void dequant_q5_1(const BlockQ5_1& b, float* y) {
    const float d = half(b.d), m = half(b.m);
    const uint32_t qh = load_u32(b.qh);
    for (int j = 0; j < kQK; ++j) {
        const int q = nibble32(b.qs, j) | static_cast<int>(((qh >> j) & 1) << 4);
        y[j] = d * static_cast<float>(q) + m;
    }
}
void quant_q5_1(const float* x, BlockQ5_1& b) {
    set_min_and_step(x, b, 31.0f);
    const float d = half(b.d), m = half(b.m);
    uint32_t qh = 0;
    for (int j = 0; j < kQK; ++j) {
        const int q = d == 0.0f ? 0 : clampi(nearest_int((x[j] - m) / d), 0, 31);
        set_nibble32(b.qs, j, q & 0xF);
        qh |= static_cast<uint32_t>(q >> 4) << j;
    }
    store_u32(b.qh, qh);
}

// ---- K-quants ------------------------------------------------------------------------
//
// A K block is a super-block of 256 weights in sub-blocks (8 x 32 for Q4_K and
// Q5_K, 16 x 16 for Q6_K). Each sub-block has its own scale (and for Q4_K/Q5_K
// a min) stored as a small integer times the super-block's f16 d (and dmin).
// Our quantizer works in two stages:
//
// 1. Per sub-block, a real-valued fit. Q4_K/Q5_K model a weight as a*q - b
//    (a, b >= 0, q in 0..qmax); Q6_K as a*q (q in -32..31, a of either sign).
//    The min/max rule (the grid spans exactly [min, max]) is a fine start but
//    not optimal: clipping a few outliers buys a finer step for everyone else.
//    So we try a few starting steps (the min/max step and 5% and 10% less)
//    and improve each by alternating two steps, Lloyd style:
//      - given (a, b), each weight takes its nearest level (clamped rounding);
//      - given the levels, (a, b) is the least-squares solution (with b >= 0).
//    Neither step increases the squared error; we stop when it no longer
//    falls, and keep the best (a, b) seen over all starts.
//
// 2. Per super-block, the fitted a (and b) are stored as 6-bit (Q6_K: signed
//    8-bit) multiples of d = max(a)/63 (dmin = max(b)/63), both rounded up
//    to f16 so the largest fits.
//    Rounding a/d to an integer loses precision for small scales, so for each
//    sub-block we try the integers around a/d (and b/dmin) and keep the
//    combination whose requantized levels give the least squared error, using
//    exactly the float values the decoder will compute.

// More starts (we tried 12, down to 0.45 of the step) gain under 0.1% in RMSE.
constexpr int kSearch = 3;      // starting steps: 1, 0.95 and 0.9 of the min/max step
constexpr int kLloydIters = 6;  // at most this many alternations per start (most settle in 2-3)

// --- asymmetric (Q4_K, Q5_K): w = a*q - b ---

// The searches evaluate levels thousands of times per block, so they take the
// reciprocal of the step (0 for a zero step) and multiply.
float inverse(float a) { return a != 0.0f ? 1.0f / a : 0.0f; }

int level_affine(float x, float inv_a, float b, int qmax) { return clampi(nearest_int((x + b) * inv_a), 0, qmax); }

double sse_affine(const float* x, int n, float a, float b, int qmax) {
    const float ia = inverse(a);
    double e = 0;
    for (int i = 0; i < n; ++i) {
        const float w = a * static_cast<float>(level_affine(x[i], ia, b, qmax)) - b;
        e += double(w - x[i]) * double(w - x[i]);
    }
    return e;
}

// One Lloyd step in one pass: the squared error of (a, b) with each weight
// on its nearest level, and the least-squares (a, b) for those levels, with
// b >= 0 enforced (b is stored as an unsigned multiple of dmin). `ok` is
// false when the levels do not determine a positive scale.
struct AffineStep {
    double err;
    float a, b;
    bool ok;
};
AffineStep lloyd_affine(const float* x, int n, float a, float b, int qmax) {
    const float ia = inverse(a);
    double err = 0, sq = 0, sqq = 0, sx = 0, sqx = 0;
    for (int i = 0; i < n; ++i) {
        const int q = level_affine(x[i], ia, b, qmax);
        const float w = a * static_cast<float>(q) - b;
        err += double(w - x[i]) * double(w - x[i]);
        sq += q, sqq += double(q) * q, sx += x[i], sqx += double(q) * x[i];
    }
    const double det = n * sqq - sq * sq;
    if (det <= 0) return {err, a, b, false};  // all levels equal
    double na = (n * sqx - sq * sx) / det;
    double nb = (na * sq - sx) / n;  // x ~ na*q - nb
    if (nb < 0) {                    // the best offset is positive: not representable, fit the scale alone
        nb = 0;
        na = sqx / sqq;
    }
    return {err, static_cast<float>(na), static_cast<float>(nb), na > 0};
}

void fit_affine(const float* x, int n, int qmax, float& a_best, float& b_best) {
    float lo, hi;
    minmax(x, n, lo, hi);
    lo = std::min(lo, 0.0f);  // b = -lo must be >= 0
    a_best = 0.0f;
    b_best = -lo;
    if (hi <= lo) return;  // constant non-positive sub-block: w = -b exactly
    double best = sse_affine(x, n, a_best, b_best, qmax);
    for (int k = 0; k < kSearch; ++k) {
        float a = (hi - lo) / static_cast<float>(qmax) * (1.0f - 0.05f * static_cast<float>(k));
        float b = -lo;
        double prev = INFINITY;
        for (int it = 0; it < kLloydIters; ++it) {
            const AffineStep st = lloyd_affine(x, n, a, b, qmax);
            if (st.err < best) best = st.err, a_best = a, b_best = b;
            if (!st.ok || st.err >= prev) break;  // settled (or degenerate)
            prev = st.err;
            a = st.a, b = st.b;
        }
    }
}

// The inverse of q4k_scale_min (quant.h); `scales` must start zeroed.
void set_q4k_scale_min(uint8_t* scales, int s, int sc, int m) {
    if (s < 4) {
        scales[s] |= static_cast<uint8_t>(sc);
        scales[s + 4] |= static_cast<uint8_t>(m);
    } else {
        scales[s + 4] = static_cast<uint8_t>((sc & 0xF) | ((m & 0xF) << 4));
        scales[s - 4] |= static_cast<uint8_t>((sc >> 4) << 6);
        scales[s] |= static_cast<uint8_t>((m >> 4) << 6);
    }
}

// Stage 2 for Q4_K/Q5_K: fills d, dmin, scales and the levels q[256].
void quant_k_affine(const float* x, int qmax, uint16_t& d_bits, uint16_t& dmin_bits, uint8_t* scales, int* q) {
    constexpr int kSub = 32, kNSub = kQK_K / kSub;
    float a[kNSub], b[kNSub];
    float amax = 0.0f, bmax = 0.0f;
    for (int s = 0; s < kNSub; ++s) {
        fit_affine(x + s * kSub, kSub, qmax, a[s], b[s]);
        amax = std::max(amax, a[s]);
        bmax = std::max(bmax, b[s]);
    }
    d_bits = half_up(amax / 63.0f);
    dmin_bits = half_up(bmax / 63.0f);
    const float d = half(d_bits), dmin = half(dmin_bits);

    std::memset(scales, 0, 12);
    for (int s = 0; s < kNSub; ++s) {
        const float* xs = x + s * kSub;
        const int sc0 = d > 0 ? nearest_int(a[s] / d) : 0;
        const int m0 = dmin > 0 ? nearest_int(b[s] / dmin) : 0;
        int best_sc = 0, best_m = 0;
        double best = INFINITY;
        for (int sc = std::max(sc0 - 1, 0); sc <= std::min(sc0 + 1, 63); ++sc)
            for (int m = std::max(m0 - 1, 0); m <= std::min(m0 + 1, 63); ++m) {
                const double e = sse_affine(xs, kSub, d * static_cast<float>(sc), dmin * static_cast<float>(m), qmax);
                if (e < best) best = e, best_sc = sc, best_m = m;
            }
        set_q4k_scale_min(scales, s, best_sc, best_m);
        const float as = d * static_cast<float>(best_sc), bs = dmin * static_cast<float>(best_m);
        for (int i = 0; i < kSub; ++i) q[s * kSub + i] = level_affine(xs[i], inverse(as), bs, qmax);
    }
}

// Weight i of a Q4_K/Q5_K block: sub-block i/32; its low 4 bits are nibble
// (i/32)%2 of qs[32*(i/64) + i%32]; Q5_K's 5th bit is bit i/32 of qh[i%32].
int q4k_low(const uint8_t* qs, int i) { return (qs[32 * (i / 64) + i % 32] >> (4 * ((i / 32) % 2))) & 0xF; }
void set_q4k_low(uint8_t* qs, int i, int q) { qs[32 * (i / 64) + i % 32] |= static_cast<uint8_t>((q & 0xF) << (4 * ((i / 32) % 2))); }

// Q4_K/Q5_K: weight i, in sub-block s, is a*q - c with q = level(i, s) and
// (a, c) the sub-block's scale and min.
template <class Block, class Level>
void dequant_affine_k(const Block& b, float* y, Level level) {
    const float d = half(b.d), dmin = half(b.dmin);
    for (int s = 0; s < 8; ++s) {
        uint8_t sc, m;
        q4k_scale_min(b.scales, s, sc, m);
        const float a = d * static_cast<float>(sc), c = dmin * static_cast<float>(m);
        for (int i = 32 * s; i < 32 * s + 32; ++i) y[i] = a * static_cast<float>(level(i, s)) - c;
    }
}

void dequant_q4_k(const BlockQ4_K& b, float* y) {
    dequant_affine_k(b, y, [&](int i, int) { return q4k_low(b.qs, i); });
}
void quant_q4_k(const float* x, BlockQ4_K& b) {
    int q[kQK_K];
    quant_k_affine(x, 15, b.d, b.dmin, b.scales, q);
    std::memset(b.qs, 0, sizeof b.qs);
    for (int i = 0; i < kQK_K; ++i) set_q4k_low(b.qs, i, q[i]);
}

void dequant_q5_k(const BlockQ5_K& b, float* y) {
    dequant_affine_k(b, y, [&](int i, int s) { return q4k_low(b.qs, i) | (((b.qh[i % 32] >> s) & 1) << 4); });
}
void quant_q5_k(const float* x, BlockQ5_K& b) {
    int q[kQK_K];
    quant_k_affine(x, 31, b.d, b.dmin, b.scales, q);
    std::memset(b.qs, 0, sizeof b.qs);
    std::memset(b.qh, 0, sizeof b.qh);
    for (int i = 0; i < kQK_K; ++i) {
        set_q4k_low(b.qs, i, q[i]);
        b.qh[i % 32] |= static_cast<uint8_t>((q[i] >> 4) << (i / 32));
    }
}

// --- symmetric (Q6_K): w = a*q, q in -32..31 ---

int level_sym(float x, float inv_a) { return clampi(nearest_int(x * inv_a), -32, 31); }

double sse_sym(const float* x, int n, float a) {
    const float ia = inverse(a);
    double e = 0;
    for (int i = 0; i < n; ++i) {
        const float w = a * static_cast<float>(level_sym(x[i], ia));
        e += double(w - x[i]) * double(w - x[i]);
    }
    return e;
}

// Starts from both ways of placing the extreme value (on level -32, which
// leaves +31 for the other side, or on level +31) and shrinks each, as above.
// Each Lloyd pass measures the error of `a` and collects the sums for the
// least-squares scale of its levels, sum(q*x) / sum(q*q).
float fit_sym(const float* x, int n) {
    const float mx = signed_absmax(x, n);
    float a_best = 0.0f;
    if (mx == 0.0f) return a_best;
    double best = sse_sym(x, n, a_best);
    for (float base : {mx / -32.0f, mx / 31.0f})
        for (int k = 0; k < kSearch; ++k) {
            float a = base * (1.0f - 0.05f * static_cast<float>(k));
            double prev = INFINITY;
            for (int it = 0; it < kLloydIters; ++it) {
                const float ia = inverse(a);
                double err = 0, sqq = 0, sqx = 0;
                for (int i = 0; i < n; ++i) {
                    const int q = level_sym(x[i], ia);
                    const float w = a * static_cast<float>(q);
                    err += double(w - x[i]) * double(w - x[i]);
                    sqq += double(q) * q, sqx += double(q) * x[i];
                }
                if (err < best) best = err, a_best = a;
                if (sqq == 0 || err >= prev) break;
                prev = err;
                a = static_cast<float>(sqx / sqq);
            }
        }
    return a_best;
}

// Weight i = 128h + 32k + l of a Q6_K block (h half, k quarter, l 0..31):
// low 4 bits are nibble k/2 of ql[64h + 32(k%2) + l], high 2 bits are bits
// 2k..2k+1 of qh[32h + l], and its scale is scales[i/16].
int q6k_ql_index(int i) { return 64 * (i / 128) + 32 * ((i / 32) % 2) + i % 32; }
int q6k_ql_shift(int i) { return 4 * ((i / 64) % 2); }
int q6k_qh_index(int i) { return 32 * (i / 128) + i % 32; }
int q6k_qh_shift(int i) { return 2 * ((i / 32) % 4); }

void dequant_q6_k(const BlockQ6_K& b, float* y) {
    const float d = half(b.d);
    for (int i = 0; i < kQK_K; ++i) {
        const int lo = (b.ql[q6k_ql_index(i)] >> q6k_ql_shift(i)) & 0xF;
        const int hi = (b.qh[q6k_qh_index(i)] >> q6k_qh_shift(i)) & 3;
        y[i] = (d * static_cast<float>(b.scales[i / 16])) * static_cast<float>((lo | (hi << 4)) - 32);
    }
}
void quant_q6_k(const float* x, BlockQ6_K& b) {
    constexpr int kSub = 16, kNSub = kQK_K / kSub;
    float a[kNSub];
    float amax = 0.0f;
    for (int s = 0; s < kNSub; ++s) {
        a[s] = fit_sym(x + s * kSub, kSub);
        amax = std::max(amax, std::fabs(a[s]));
    }
    // Scales are int8; using +-127 keeps them symmetric.
    b.d = half_up(amax / 127.0f);
    const float d = half(b.d);
    std::memset(b.ql, 0, sizeof b.ql);
    std::memset(b.qh, 0, sizeof b.qh);
    for (int s = 0; s < kNSub; ++s) {
        const float* xs = x + s * kSub;
        const int sc0 = d > 0 ? nearest_int(a[s] / d) : 0;
        int best_sc = 0;
        double best = INFINITY;
        for (int sc = std::max(sc0 - 1, -127); sc <= std::min(sc0 + 1, 127); ++sc) {
            const double e = sse_sym(xs, kSub, d * static_cast<float>(sc));
            if (e < best) best = e, best_sc = sc;
        }
        b.scales[s] = static_cast<int8_t>(best_sc);
        const float as = d * static_cast<float>(best_sc);
        for (int j = 0; j < kSub; ++j) {
            const int i = s * kSub + j;
            const int q = level_sym(xs[j], inverse(as)) + 32;
            b.ql[q6k_ql_index(i)] |= static_cast<uint8_t>((q & 0xF) << q6k_ql_shift(i));
            b.qh[q6k_qh_index(i)] |= static_cast<uint8_t>((q >> 4) << q6k_qh_shift(i));
        }
    }
}

// --- Q8_K: plain absmax with an f32 scale, plus group sums ---

void dequant_q8_k(const BlockQ8_K& b, float* y) {
    for (int i = 0; i < kQK_K; ++i) y[i] = b.d * static_cast<float>(b.qs[i]);
}
void quant_q8_k(const float* x, BlockQ8_K& b) {
    float amax = 0.0f;
    for (int i = 0; i < kQK_K; ++i) amax = std::max(amax, std::fabs(x[i]));
    b.d = amax / 127.0f;
    for (int i = 0; i < kQK_K; ++i) b.qs[i] = static_cast<int8_t>(b.d == 0.0f ? 0 : clampi(nearest_int(x[i] / b.d), -127, 127));
    for (int g = 0; g < kQK_K / 16; ++g) {
        int sum = 0;
        for (int i = 16 * g; i < 16 * g + 16; ++i) sum += b.qs[i];
        b.bsums[g] = static_cast<int16_t>(sum);
    }
}

// ---- row drivers ------------------------------------------------------------------

// Blocks are copied through a local struct, so src/dst need no alignment.
template <class Block, int Elems, void (*Decode)(const Block&, float*)>
void dequant_blocks(const void* src, float* dst, int64_t nb) {
    const auto* p = static_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < nb; ++i) {
        Block b;
        std::memcpy(&b, p + i * sizeof(Block), sizeof(Block));
        Decode(b, dst + i * Elems);
    }
}

template <class Block, int Elems, void (*Encode)(const float*, Block&)>
void quant_blocks(const float* src, void* dst, int64_t nb) {
    auto* p = static_cast<uint8_t*>(dst);
    for (int64_t i = 0; i < nb; ++i) {
        Block b{};
        Encode(src + i * Elems, b);
        std::memcpy(p + i * sizeof(Block), &b, sizeof(Block));
    }
}

// A block type's row drivers, both ways.
template <class Block, int Elems, void (*Decode)(const Block&, float*), void (*Encode)(const float*, Block&)>
struct BlockCodec {
    static void dequant(const void* src, float* dst, int64_t nb) { dequant_blocks<Block, Elems, Decode>(src, dst, nb); }
    static void quant(const float* src, void* dst, int64_t nb) { quant_blocks<Block, Elems, Encode>(src, dst, nb); }
};

// Calls f(BlockCodec<...>{}) for the block type t; does nothing for the types
// that are not made of blocks (block_count has rejected the others already).
template <class F>
void with_block_codec(GGMLType t, F&& f) {
    switch (t) {
        case GGMLType::Q8_0: f(BlockCodec<BlockQ8_0, kQK, dequant_q8_0, quant_q8_0>{}); break;
        case GGMLType::Q4_0: f(BlockCodec<BlockQ4_0, kQK, dequant_q4_0, quant_q4_0>{}); break;
        case GGMLType::Q4_1: f(BlockCodec<BlockQ4_1, kQK, dequant_q4_1, quant_q4_1>{}); break;
        case GGMLType::Q5_0: f(BlockCodec<BlockQ5_0, kQK, dequant_q5_0, quant_q5_0>{}); break;
        case GGMLType::Q5_1: f(BlockCodec<BlockQ5_1, kQK, dequant_q5_1, quant_q5_1>{}); break;
        case GGMLType::Q4_K: f(BlockCodec<BlockQ4_K, kQK_K, dequant_q4_k, quant_q4_k>{}); break;
        case GGMLType::Q5_K: f(BlockCodec<BlockQ5_K, kQK_K, dequant_q5_k, quant_q5_k>{}); break;
        case GGMLType::Q6_K: f(BlockCodec<BlockQ6_K, kQK_K, dequant_q6_k, quant_q6_k>{}); break;
        case GGMLType::Q8_K: f(BlockCodec<BlockQ8_K, kQK_K, dequant_q8_k, quant_q8_k>{}); break;
        default: break;
    }
}

bool supported(GGMLType t) {
    switch (t) {
        case GGMLType::F32: case GGMLType::F16: case GGMLType::BF16:
        case GGMLType::Q8_0: case GGMLType::Q4_0: case GGMLType::Q4_1: case GGMLType::Q5_0: case GGMLType::Q5_1:
        case GGMLType::Q4_K: case GGMLType::Q5_K: case GGMLType::Q6_K: case GGMLType::Q8_K:
            return true;
        default:
            return false;
    }
}

// Validates (t, n) and returns the number of blocks.
int64_t block_count(GGMLType t, int64_t n, const char* what) {
    const GGMLTypeTraits* tr = ggml_type_traits(static_cast<uint32_t>(t));
    if (!tr || !supported(t))
        throw std::invalid_argument(std::string(what) + ": unsupported type " +
                                    (tr ? tr->name : "id " + std::to_string(static_cast<uint32_t>(t))));
    if (n < 0 || n % tr->block_elems != 0)
        throw std::invalid_argument(std::string(what) + ": " + std::to_string(n) + " elements is not a whole number of " +
                                    tr->name + " blocks (" + std::to_string(tr->block_elems) + " elements each)");
    return n / tr->block_elems;
}

}  // namespace

bool is_quantized(GGMLType t) {
    const GGMLTypeTraits* tr = ggml_type_traits(static_cast<uint32_t>(t));
    return tr && tr->block_elems > 1;
}
bool can_dequantize(GGMLType t) { return supported(t); }
bool can_quantize(GGMLType t) { return supported(t); }

void dequantize_row(GGMLType t, const void* src, float* dst, int64_t n) {
    const int64_t nb = block_count(t, n, "dequantize_row");
    const auto* p = static_cast<const uint8_t*>(src);
    switch (t) {
        case GGMLType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); break;
        case GGMLType::F16:
            for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(load_half_bits(p + 2 * i));
            break;
        case GGMLType::BF16:
            for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(load_half_bits(p + 2 * i));
            break;
        default: with_block_codec(t, [&](auto codec) { codec.dequant(src, dst, nb); }); break;
    }
}

void quantize_row(GGMLType t, const float* src, void* dst, int64_t n) {
    const int64_t nb = block_count(t, n, "quantize_row");
    auto* p = static_cast<uint8_t*>(dst);
    switch (t) {
        case GGMLType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); break;
        case GGMLType::F16:
            for (int64_t i = 0; i < n; ++i) store_half_bits(p + 2 * i, f32_to_fp16(src[i]));
            break;
        case GGMLType::BF16:
            for (int64_t i = 0; i < n; ++i) store_half_bits(p + 2 * i, f32_to_bf16(src[i]));
            break;
        default: with_block_codec(t, [&](auto codec) { codec.quant(src, dst, nb); }); break;
    }
}

}  // namespace minfer
