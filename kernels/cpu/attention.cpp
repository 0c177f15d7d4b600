#include "kernels/cpu/attention.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <memory>

#include "kernels/formats/float16.h"

namespace minfer::cpu {

namespace {

// W lanes as one value (GCC/Clang vector extensions): 16 are one AVX-512
// register, two AVX2 ones, or four SSE/NEON; each operation is lane by lane
// IEEE arithmetic whatever the machine and whatever W, so a lane's bits do not
// depend on the width of the tile that holds it.
template <int W>
struct Lanes {
    typedef float f32 __attribute__((vector_size(W * sizeof(float))));
    typedef int32_t i32 __attribute__((vector_size(W * sizeof(int32_t))));
};

inline float widen(float x) { return x; }
inline float widen(uint16_t x) { return bf16_to_f32(x); }

// e^x for x <= 0 (scores minus their lane's maximum) as 2^i * 2^f, with a
// degree-6 polynomial for 2^f on [-0.5, 0.5] (relative error under 2e-7).
// 0 below -87, and at -inf (a masked key).
template <class f32xL, class i32xL>
inline f32xL exp_nonpositive(f32xL x) {
    const f32xL floor87 = f32xL{} - 87.0f;
    const f32xL t = (x < floor87 ? floor87 : x) * 1.44269504088896341f;  // log2(e)
    const f32xL magic = f32xL{} + 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
    const f32xL i = (t + magic) - magic;
    const f32xL f = t - i;
    f32xL p = f32xL{} + 1.5403530393381606e-4f;
    p = p * f + 1.3333558146428443e-3f;
    p = p * f + 9.6181291076284772e-3f;
    p = p * f + 5.5504108664821580e-2f;
    p = p * f + 2.4022650695910071e-1f;
    p = p * f + 6.9314718055994531e-1f;
    p = p * f + 1.0f;
    const i32xL bits = (__builtin_convertvector(i, i32xL) + 127) << 23;
    const f32xL scaled = (f32xL)bits * p;
    return x < floor87 ? f32xL{} : scaled;
}

// attend_tile over R registers of W lanes (tile.lanes <= R * W): lane l is
// lane l % W of register l / W. Every loop over r is unrolled, so that the R
// registers stay registers; each key element loaded feeds all R of them.
template <int W, int R, class T>
void attend_lanes(const AttentionTile& tile, const float* q_all, int32_t n_heads, int32_t hd, float scale,
                  const T* k_pool, const T* v_pool, const PagedSequence& seq, std::vector<float>& scratch,
                  float* out) {
    using V = typename Lanes<W>::f32;
    using Vi = typename Lanes<W>::i32;
    constexpr int L = W * R;
    int32_t lo = tile.first[0], hi = tile.last[0];
    for (int l = 1; l < tile.lanes; ++l) lo = std::min(lo, tile.first[l]), hi = std::max(hi, tile.last[l]);
    // A lane past `lanes` repeats lane 0 (its results are dropped): every lane computes.
    Vi first[R], last[R];
    for (int l = 0; l < L; ++l) {
        const int src = l < tile.lanes ? l : 0;
        first[l / W][l % W] = tile.first[src];
        last[l / W][l % W] = tile.last[src];
    }
    const int32_t keys = hi - lo + 1;
    // [hd][R] queries (transposed: lane l of qt[j * R + l / W] is pair l's element j),
    // [hd][R] outputs, [keys][R] scores then e^(score - max); aligned for V.
    scratch.resize(size_t(2 * hd + keys) * L + W);
    void* base = scratch.data();
    size_t room = scratch.size() * sizeof(float);
    V* qt = static_cast<V*>(std::align(alignof(V), sizeof(V), base, room));
    V* o = qt + hd * R;
    V* s = o + hd * R;
    for (int l = 0; l < L; ++l) {
        const int src = l < tile.lanes ? l : 0;
        const float* q = q_all + (int64_t(tile.row[src]) * n_heads + tile.head[src]) * hd;
        for (int32_t j = 0; j < hd; ++j) qt[j * R + l / W][l % W] = q[j];
    }
    auto pool_row = [&](const T* pool, int32_t t) {
        const int64_t slot = int64_t(seq.block_table[t / seq.block_size]) * seq.block_size + t % seq.block_size;
        return pool + slot * seq.kv_row + int64_t(tile.kv_head) * hd;
    };

#define UNROLL _Pragma("GCC unroll 16")
    // S = scale * Q K^T, masked per lane, and each lane's maximum. A score is
    // a serial chain of hd multiply-adds, each waiting for the last: G keys go
    // together, so that their chains interleave (the bits of each are the same
    // as alone).
    const V minus_inf = V{} - INFINITY;
    V m[R];
    UNROLL for (int r = 0; r < R; ++r) m[r] = minus_inf;
    auto finish_score = [&](int32_t t, const V* acc) {
        UNROLL for (int r = 0; r < R; ++r) {
            const Vi inside = (first[r] <= t) & (last[r] >= t);
            const V st = inside ? acc[r] * scale : minus_inf;
            s[(t - lo) * R + r] = st;
            m[r] = m[r] > st ? m[r] : st;
        }
    };
    constexpr int G = 8 / R;
    int32_t t = lo;
    for (; t + G - 1 <= hi; t += G) {
        const T* k[G];
        V acc[G][R];
        UNROLL for (int g = 0; g < G; ++g) {
            k[g] = pool_row(k_pool, t + g);
            UNROLL for (int r = 0; r < R; ++r) acc[g][r] = V{};
        }
        for (int32_t j = 0; j < hd; ++j)
            UNROLL for (int g = 0; g < G; ++g) {
                const float kj = widen(k[g][j]);
                UNROLL for (int r = 0; r < R; ++r) acc[g][r] += qt[j * R + r] * kj;
            }
        UNROLL for (int g = 0; g < G; ++g) finish_score(t + g, acc[g]);
    }
    for (; t <= hi; ++t) {
        const T* k = pool_row(k_pool, t);
        V acc[R] = {};
        for (int32_t j = 0; j < hd; ++j) {
            const float kj = widen(k[j]);
            UNROLL for (int r = 0; r < R; ++r) acc[r] += qt[j * R + r] * kj;
        }
        finish_score(t, acc);
    }
    // P = e^(S - max), each lane's sum, and O = P V, all serial over the keys;
    // O's row is read and written once for P keys.
    V total[R] = {};
    for (int32_t j = 0; j < hd * R; ++j) o[j] = V{};
    auto weights = [&](int32_t t, V* pt) {
        UNROLL for (int r = 0; r < R; ++r) {
            pt[r] = exp_nonpositive<V, Vi>(s[(t - lo) * R + r] - m[r]);
            total[r] += pt[r];
        }
    };
    constexpr int P = 4;
    for (t = lo; t + P - 1 <= hi; t += P) {
        const T* v[P];
        V pt[P][R];
        UNROLL for (int g = 0; g < P; ++g) {
            weights(t + g, pt[g]);
            v[g] = pool_row(v_pool, t + g);
        }
        for (int32_t j = 0; j < hd; ++j)
            UNROLL for (int r = 0; r < R; ++r) {
                V acc = o[j * R + r];
                UNROLL for (int g = 0; g < P; ++g) acc += pt[g][r] * widen(v[g][j]);
                o[j * R + r] = acc;
            }
    }
    for (; t <= hi; ++t) {
        V pt[R];
        weights(t, pt);
        const T* v = pool_row(v_pool, t);
        for (int32_t j = 0; j < hd; ++j) {
            const float vj = widen(v[j]);
            UNROLL for (int r = 0; r < R; ++r) o[j * R + r] += pt[r] * vj;
        }
    }
#undef UNROLL
    for (int l = 0; l < tile.lanes; ++l) {
        float* dst = out + (int64_t(tile.row[l]) * n_heads + tile.head[l]) * hd;
        for (int32_t j = 0; j < hd; ++j) dst[j] = o[j * R + l / W][l % W] / total[l / W][l % W];
    }
}

}  // namespace

template <class T>
void attend_tile(const AttentionTile& tile, const float* q_all, int32_t n_heads, int32_t hd, float scale,
                 const T* k_pool, const T* v_pool, const PagedSequence& seq, std::vector<float>& scratch, float* out) {
    // A wide tile shares each key element it loads between two registers of
    // lanes. (A narrower register for a decode row's few lanes, 4 lanes of SSE
    // for one, measured no faster: the instructions are as many.)
    if (tile.lanes <= 16)
        attend_lanes<16, 1>(tile, q_all, n_heads, hd, scale, k_pool, v_pool, seq, scratch, out);
    else
        attend_lanes<16, 2>(tile, q_all, n_heads, hd, scale, k_pool, v_pool, seq, scratch, out);
}

template void attend_tile<float>(const AttentionTile&, const float*, int32_t, int32_t, float, const float*,
                                 const float*, const PagedSequence&, std::vector<float>&, float*);
template void attend_tile<uint16_t>(const AttentionTile&, const float*, int32_t, int32_t, float, const uint16_t*,
                                    const uint16_t*, const PagedSequence&, std::vector<float>&, float*);

}  // namespace minfer::cpu
