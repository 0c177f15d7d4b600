#include "kernels/cpu/attention.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>

#include "kernels/cpu/attention_lanes.h"

namespace minfer::cpu {

namespace {

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
    thread_local std::vector<int64_t> slots;
    slots.resize(size_t(keys));
    key_slots(seq, lo, hi, slots.data());
    auto pool_row = [&](const T* pool, int32_t t) { return pool + slots[size_t(t - lo)] * seq.kv_row + int64_t(tile.kv_head) * hd; };

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
    // A decode row's few pairs take keys as lanes (attention_narrow.cpp); a
    // wide tile shares each key element it loads between two registers of lanes.
    if (tile.lanes <= kNarrowLanes)
        attend_narrow(tile, q_all, n_heads, hd, scale, k_pool, v_pool, seq, scratch, out);
    else if (tile.lanes <= 16)
        attend_lanes<16, 1>(tile, q_all, n_heads, hd, scale, k_pool, v_pool, seq, scratch, out);
    else
        attend_lanes<16, 2>(tile, q_all, n_heads, hd, scale, k_pool, v_pool, seq, scratch, out);
}

template void attend_tile<float>(const AttentionTile&, const float*, int32_t, int32_t, float, const float*,
                                 const float*, const PagedSequence&, std::vector<float>&, float*);
template void attend_tile<uint16_t>(const AttentionTile&, const float*, int32_t, int32_t, float, const uint16_t*,
                                    const uint16_t*, const PagedSequence&, std::vector<float>&, float*);

}  // namespace minfer::cpu
