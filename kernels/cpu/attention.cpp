#include "kernels/cpu/attention.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <memory>

#include "kernels/formats/float16.h"

namespace minfer::cpu {

namespace {

constexpr int L = kAttentionLanes;
// The lanes as one value (GCC/Clang vector extensions): one AVX-512 register,
// two AVX2 ones, or four SSE/NEON; each operation is lane by lane IEEE
// arithmetic whatever the machine.
typedef float f32xL __attribute__((vector_size(L * sizeof(float))));
typedef int32_t i32xL __attribute__((vector_size(L * sizeof(int32_t))));

inline float widen(float x) { return x; }
inline float widen(uint16_t x) { return bf16_to_f32(x); }

// e^x for x <= 0 (scores minus their lane's maximum) as 2^i * 2^f, with a
// degree-6 polynomial for 2^f on [-0.5, 0.5] (relative error under 2e-7).
// 0 below -87, and at -inf (a masked key).
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

}  // namespace

template <class T>
void attend_tile(const AttentionTile& tile, const float* q_all, int32_t n_heads, int32_t hd, float scale,
                 const T* k_pool, const T* v_pool, const PagedSequence& seq, std::vector<float>& scratch, float* out) {
    int32_t lo = tile.first[0], hi = tile.last[0];
    for (int l = 1; l < tile.lanes; ++l) lo = std::min(lo, tile.first[l]), hi = std::max(hi, tile.last[l]);
    // A lane past `lanes` repeats lane 0 (its results are dropped): every lane computes.
    i32xL first, last;
    for (int l = 0; l < L; ++l) {
        const int src = l < tile.lanes ? l : 0;
        first[l] = tile.first[src];
        last[l] = tile.last[src];
    }
    const int32_t keys = hi - lo + 1;
    // [hd] queries (transposed: lane l of qt[j] is pair l's element j), [hd] outputs,
    // [keys] scores then e^(score - max); 64-byte aligned.
    scratch.resize(size_t(2 * hd + keys) * L + L);
    void* base = scratch.data();
    size_t room = scratch.size() * sizeof(float);
    f32xL* qt = static_cast<f32xL*>(std::align(alignof(f32xL), sizeof(f32xL), base, room));
    f32xL* o = qt + hd;
    f32xL* s = o + hd;
    for (int l = 0; l < L; ++l) {
        const int src = l < tile.lanes ? l : 0;
        const float* q = q_all + (int64_t(tile.row[src]) * n_heads + tile.head[src]) * hd;
        for (int32_t j = 0; j < hd; ++j) qt[j][l] = q[j];
    }
    auto pool_row = [&](const T* pool, int32_t t) {
        const int64_t slot = int64_t(seq.block_table[t / seq.block_size]) * seq.block_size + t % seq.block_size;
        return pool + slot * seq.kv_row + int64_t(tile.kv_head) * hd;
    };

    // S = scale * Q K^T, masked per lane, and each lane's maximum.
    const f32xL minus_inf = f32xL{} - INFINITY;
    f32xL m = minus_inf;
    for (int32_t t = lo; t <= hi; ++t) {
        const T* k = pool_row(k_pool, t);
        f32xL acc{};
        for (int32_t j = 0; j < hd; ++j) acc += qt[j] * widen(k[j]);
        const i32xL inside = (first <= t) & (last >= t);
        const f32xL st = inside ? acc * scale : minus_inf;
        s[t - lo] = st;
        m = m > st ? m : st;
    }
    // P = e^(S - max), each lane's sum, and O = P V, all serial over the keys.
    f32xL total{};
    for (int32_t j = 0; j < hd; ++j) o[j] = f32xL{};
    for (int32_t t = lo; t <= hi; ++t) {
        const f32xL pt = exp_nonpositive(s[t - lo] - m);
        total += pt;
        const T* v = pool_row(v_pool, t);
        for (int32_t j = 0; j < hd; ++j) o[j] += pt * widen(v[j]);
    }
    for (int l = 0; l < tile.lanes; ++l) {
        float* dst = out + (int64_t(tile.row[l]) * n_heads + tile.head[l]) * hd;
        for (int32_t j = 0; j < hd; ++j) dst[j] = o[j][l] / total[l];
    }
}

template void attend_tile<float>(const AttentionTile&, const float*, int32_t, int32_t, float, const float*,
                                 const float*, const PagedSequence&, std::vector<float>&, float*);
template void attend_tile<uint16_t>(const AttentionTile&, const float*, int32_t, int32_t, float, const uint16_t*,
                                    const uint16_t*, const PagedSequence&, std::vector<float>&, float*);

}  // namespace minfer::cpu
