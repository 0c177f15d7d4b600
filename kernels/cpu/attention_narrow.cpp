// Attention for a tile of a few (row, head) pairs: a decode row's query heads
// of one kv head (one pair under multi-head attention). With pairs as lanes,
// 15 of 16 lanes would compute nothing; here the lanes are 16 keys while the
// scores are computed, then 16 of the head's dimensions while the values are
// summed, pair by pair.
//
// The bits are those of the wide tiles (attention.cpp), which the tests check:
// a score is the same serial chain of fma(q[j], k[j]) over j, only now 16 keys'
// chains run side by side in one register; e^(s - max) is the same lane-wise
// polynomial; the sum of P and each o[j] are the same serial sums over the
// keys in order. Keys come 16 at a time from 16 rows of the pool, so they are
// transposed in registers first (AVX-512; elsewhere one element at a time).
#include <algorithm>
#include <cmath>
#include <memory>

#include "kernels/cpu/attention_lanes.h"

#if defined(__AVX512F__)
// GCC 12's AVX-512 headers warn about their own _mm512_undefined_*() (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

namespace minfer::cpu {

namespace {

constexpr int W = 16;

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define MINFER_NARROW_AVX512 1
// Stage s (b = 8 >> s) of the butterfly: where each lane of the two rows
// (g, g + b) comes from, as indices into [row g | row g + b].
struct Butterfly {
    alignas(64) int32_t lo[4][W];
    alignas(64) int32_t hi[4][W];
    constexpr Butterfly() : lo{}, hi{} {
        for (int s = 0; s < 4; ++s)
            for (int c = 0; c < W; ++c) {
                const int b = 8 >> s;
                lo[s][c] = c & b ? W + c - b : c;
                hi[s][c] = c & b ? W + c : c + b;
            }
    }
};
constexpr Butterfly kButterfly;
#else
#define MINFER_NARROW_AVX512 0
#endif

// kt[j] = (row 0's element j, ..., row 15's element j) for j < hd.
template <class T>
void transpose_rows(const T* const rows[W], int32_t hd, f32x16* kt) {
#if MINFER_NARROW_AVX512
    for (int32_t j0 = 0; j0 < hd; j0 += W) {
        const __mmask16 mask = hd - j0 >= W ? 0xFFFF : __mmask16((1u << (hd - j0)) - 1);
        __m512 r[W];
        for (int g = 0; g < W; ++g) {
            if constexpr (sizeof(T) == 4) {
                r[g] = _mm512_maskz_loadu_ps(mask, rows[g] + j0);
            } else {  // bf16: the top half of a float
                const __m256i h = _mm256_maskz_loadu_epi16(mask, rows[g] + j0);
                r[g] = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
            }
        }
        // Four butterfly stages: stage b swaps bit b of the row index with bit
        // b of the lane index, so after b = 8, 4, 2, 1 row g lane c holds
        // what row c lane g held.
        for (int stage = 0; stage < 4; ++stage) {
            const int b = 8 >> stage;
            const __m512i lo = _mm512_load_si512(kButterfly.lo[stage]), hi = _mm512_load_si512(kButterfly.hi[stage]);
            for (int g = 0; g < W; ++g) {
                if (g & b) continue;
                const __m512 a = r[g], c = r[g + b];
                r[g] = _mm512_permutex2var_ps(a, lo, c);
                r[g + b] = _mm512_permutex2var_ps(a, hi, c);
            }
        }
        for (int32_t j = j0; j < std::min(hd, j0 + W); ++j) std::memcpy(&kt[j], &r[j - j0], sizeof(f32x16));
    }
#else
    for (int32_t j = 0; j < hd; ++j)
        for (int g = 0; g < W; ++g) kt[j][g] = widen(rows[g][j]);
#endif
}

inline f32x16 load16(const float* p) {
    f32x16 v;
    std::memcpy(&v, p, sizeof(v));
    return v;
}
inline f32x16 load16(const uint16_t* p) {  // bf16: the top half of a float
    typedef uint16_t u16x16 __attribute__((vector_size(32)));
    u16x16 h;
    std::memcpy(&h, p, sizeof(h));
    return (f32x16)(__builtin_convertvector(h, i32x16) << 16);
}

}  // namespace

template <class T>
void attend_narrow(const AttentionTile& tile, const float* q_all, int32_t n_heads, int32_t hd, float scale,
                   const T* k_pool, const T* v_pool, const PagedSequence& seq, std::vector<float>& scratch,
                   float* out) {
    const int lanes = tile.lanes;
    int32_t lo = tile.first[0], hi = tile.last[0];
    for (int l = 1; l < lanes; ++l) lo = std::min(lo, tile.first[l]), hi = std::max(hi, tile.last[l]);
    const int32_t keys = hi - lo + 1, padded = (keys + W - 1) / W * W;
    // [hd] transposed keys, then [lanes][padded] scores (then weights); aligned for f32x16.
    scratch.resize(size_t(hd + lanes * padded / W) * W + W);
    void* base = scratch.data();
    size_t room = scratch.size() * sizeof(float);
    f32x16* kt = static_cast<f32x16*>(std::align(alignof(f32x16), sizeof(f32x16), base, room));
    float* s = reinterpret_cast<float*>(kt + hd);
    thread_local std::vector<int64_t> slots;
    slots.resize(size_t(keys));
    key_slots(seq, lo, hi, slots.data());
    auto pool_row = [&](const T* pool, int32_t t) { return pool + slots[size_t(t - lo)] * seq.kv_row + int64_t(tile.kv_head) * hd; };
    const f32x16 minus_inf = f32x16{} - INFINITY;
    f32x16 lane_index;
    for (int g = 0; g < W; ++g) lane_index[g] = float(g);

    // S = scale * Q K^T, 16 keys at a time; each lane's maximum.
    float m[kNarrowLanes];
    std::fill(m, m + lanes, -INFINITY);
    for (int32_t t0 = lo; t0 <= hi; t0 += W) {
        const T* rows[W];
        for (int g = 0; g < W; ++g) rows[g] = pool_row(k_pool, std::min(t0 + g, hi));  // past hi: dropped
        transpose_rows(rows, hd, kt);
        for (int l = 0; l < lanes; ++l) {
            const float* q = q_all + (int64_t(tile.row[l]) * n_heads + tile.head[l]) * hd;
            f32x16 acc{};
            for (int32_t j = 0; j < hd; ++j) acc += q[j] * kt[j];
            // Key t0 + g is inside this pair's range [first, last].
            const f32x16 t = lane_index + float(t0);
            const i32x16 inside = (t >= float(tile.first[l])) & (t <= float(tile.last[l]));
            const f32x16 st = inside ? acc * scale : minus_inf;
            std::memcpy(s + l * padded + (t0 - lo), &st, sizeof(st));
            for (int g = 0; g < W && t0 + g <= hi; ++g) m[l] = m[l] > st[g] ? m[l] : st[g];
        }
    }

    // P = e^(S - max) and its serial sum; O = P V with the dimensions as lanes.
    constexpr int kChunk = 4 * W;  // dimensions a pass over the keys: 4 registers
    for (int l = 0; l < lanes; ++l) {
        float* p = s + l * padded;
        float total = 0;
        for (int32_t t = 0; t < padded; t += W) {
            f32x16 x;
            std::memcpy(&x, p + t, sizeof(x));
            const f32x16 e = exp_nonpositive<f32x16, i32x16>(x - m[l]);
            std::memcpy(p + t, &e, sizeof(e));
        }
        for (int32_t t = 0; t < keys; ++t) total += p[t];
        float* dst = out + (int64_t(tile.row[l]) * n_heads + tile.head[l]) * hd;
        for (int32_t j0 = 0; j0 < hd; j0 += kChunk) {
            const int32_t nj = std::min(kChunk, hd - j0), nv = nj / W;
            f32x16 o[4] = {};
            float tail[W] = {};
            if (nj == kChunk) {
                for (int32_t t = lo; t <= hi; ++t) {
                    const float pt = p[t - lo];
                    const T* v = pool_row(v_pool, t) + j0;
#pragma GCC unroll 4
                    for (int c = 0; c < 4; ++c) o[c] += pt * load16(v + W * c);
                }
            } else {
                for (int32_t t = lo; t <= hi; ++t) {
                    const float pt = p[t - lo];
                    const T* v = pool_row(v_pool, t) + j0;
                    for (int c = 0; c < nv; ++c) o[c] += pt * load16(v + W * c);
                    for (int32_t e = W * nv; e < nj; ++e) tail[e - W * nv] += pt * widen(v[e]);
                }
            }
            for (int32_t e = 0; e < nj; ++e) dst[j0 + e] = (e < W * nv ? o[e / W][e % W] : tail[e - W * nv]) / total;
        }
    }
}

template void attend_narrow<float>(const AttentionTile&, const float*, int32_t, int32_t, float, const float*,
                                   const float*, const PagedSequence&, std::vector<float>&, float*);
template void attend_narrow<uint16_t>(const AttentionTile&, const float*, int32_t, int32_t, float, const uint16_t*,
                                      const uint16_t*, const PagedSequence&, std::vector<float>&, float*);

}  // namespace minfer::cpu
