// Paged attention: three kernels.
//
// 1. decode_kernel (flash-decoding): one block per (row, kv head, split of the
//    key range). The block handles every q head of the kv head's GQA group, so
//    K and V are read once per group: tiles of 32 keys are copied into shared
//    memory with 16-byte cp.async (double-buffered), then lane j of each warp
//    scores key j for the warp's heads, an online softmax runs per head, and
//    the lanes accumulate P*V over float4 columns. With more than one split,
//    each block writes an unnormalised partial (m, l, acc) to the workspace
//    (m = -inf, l = 0 when its split lies outside the row's keys) and
//    combine_kernel merges the splits in split order (deterministic). The
//    launch shape depends only on num_tokens, max_blocks_per_seq, block_size
//    and the head shape (CUDA-graph friendly).
// 2. prefill_kernel: tensor cores (mma.sync m16n8k8 tf32, 3xTF32 split so the
//    products are near fp32). One block per (tile of <= kAttnTileRows rows of
//    one sequence, kv head, chunk): the tile's (row, q head of the group)
//    pairs are packed 64 to a chunk, a warp owning 16 of them; K/V tiles of 32
//    keys are double-buffered in shared memory; S = Q K^T and O += P V stay in
//    registers (FlashAttention-2 style) with causal/window masks per row.
// 4. prefill_bf16_kernel: prefill_kernel's blocking over a bf16 pool, with
//    bf16 m16n8k16 tensor-core products (Q and P rounded to bf16).
// 3. reference_kernel: the first version (a block per (row, head), scalar
//    loads), kept for head dims that are not a multiple of 4 (8 for a bf16
//    pool) and unaligned pointers.
//
// Every kernel is a template on the pool's element type, float or bf16: a
// 16-byte copy moves 4 or 8 of them, shared memory holds them as they are,
// and they are widened to float where they are read for arithmetic.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/env_switch.h"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/reduce.cuh"

namespace minfer::cuda {

namespace {

struct AttnArgs {
    HeadShape heads;
    float scale;
    int32_t window;
};

// ---- small device helpers ------------------------------------------------------

__device__ __forceinline__ float warp_max(float v) {
    for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

// Where a kv head's keys lie in a bf16 pool: the sequence's block table, and
// the last key a tile may hold (later ones are zero-filled).
struct KvTileSource {
    const int32_t* table;
    int32_t block_size;
    int64_t kv_row;  // elements per token: n_kv_heads * head_dim
    int32_t kvh, hd, hd16;
    int32_t hi;
};

// Keys t0..t0+Keys-1 of K and V into rows of ld bf16 (hd16 used), one 16-byte
// cp.async a piece; keys past src.hi and columns past head_dim are zeros.
template <int Keys, int Threads>
__device__ __forceinline__ void load_kv_tile_bf16(const KvTileSource& src, const __nv_bfloat16* k_pool,
                                                  const __nv_bfloat16* v_pool, int32_t t0, __nv_bfloat16* ks,
                                                  __nv_bfloat16* vs, int32_t ld) {
    const int32_t copies16 = src.hd16 / 8, copies = src.hd / 8;
    for (int32_t i = threadIdx.x; i < Keys * copies16; i += Threads) {
        const int32_t key = i / copies16, c = i - key * copies16, t = t0 + key;
        const bool ok = t <= src.hi && c < copies;
        int64_t off = 0;
        if (ok)
            off = (int64_t(src.table[t / src.block_size]) * src.block_size + t % src.block_size) * src.kv_row +
                  int64_t(src.kvh) * src.hd + c * 8;
        cp_async16(ks + key * ld + c * 8, k_pool + off, ok);
        cp_async16(vs + key * ld + c * 8, v_pool + off, ok);
    }
}

__device__ __forceinline__ int32_t window_first(int32_t pos, int32_t window) {
    return window > 0 ? max(0, pos - window + 1) : 0;
}

// The pool's elements: float, or bf16 (exact in float: a 16-bit shift).
using bf16 = __nv_bfloat16;
__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ float widen(bf16 x) { return __bfloat162float(x); }
// Four consecutive elements as floats (16-byte aligned for float, 8 for bf16).
__device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ float4 load4(const bf16* p) {
    const uint2 u = *reinterpret_cast<const uint2*>(p);
    return make_float4(__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xffff0000u), __uint_as_float(u.y << 16),
                       __uint_as_float(u.y & 0xffff0000u));
}
// One 16-byte copy's elements (4 floats or 8 bf16) as floats.
__device__ __forceinline__ void load_copy(const float* p, float (&f)[4]) {
    const float4 v = *reinterpret_cast<const float4*>(p);
    f[0] = v.x, f[1] = v.y, f[2] = v.z, f[3] = v.w;
}
__device__ __forceinline__ void load_copy(const bf16* p, float (&f)[8]) {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        f[2 * i] = __uint_as_float(w[i] << 16);
        f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
}
// Elements in one 16-byte copy.
template <class T>
constexpr int kPerCopy = 16 / int(sizeof(T));

// ---- 1. reference kernel (fallback) ---------------------------------------------------

constexpr int kRefThreads = 128;
constexpr int kRefWarps = kRefThreads / 32;
constexpr int kRefTile = 64;  // keys per pass; <= kRefThreads so that one thread exponentiates each score
constexpr int kRefDimsPerThread = kMaxHeadDim / kRefThreads;

template <class T>
__global__ void __launch_bounds__(kRefThreads) reference_kernel(DeviceStep st, const float* q, const T* k_pool,
                                                                const T* v_pool, AttnArgs a, float* out) {
    pdl_wait();
    __shared__ float q_s[kMaxHeadDim];
    __shared__ float p_s[kRefTile];  // scores, then their exponentials
    const int32_t row = blockIdx.x, h = blockIdx.y, hd = a.heads.head_dim, bs = st.block_size;
    const int32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int64_t kv_row = int64_t(a.heads.n_kv_heads) * hd;
    const int64_t kv_off = int64_t(h / (a.heads.n_heads / a.heads.n_kv_heads)) * hd;
    const int32_t pos = st.positions[row];
    const int32_t first = window_first(pos, a.window);
    const int32_t* table = st.block_tables + int64_t(st.row_seq[row]) * st.max_blocks_per_seq;
    auto slot = [&](int32_t t) { return int64_t(table[t / bs]) * bs + t % bs; };

    const float* q_row = q + (int64_t(row) * a.heads.n_heads + h) * hd;
    for (int32_t d = threadIdx.x; d < hd; d += kRefThreads) q_s[d] = q_row[d];
    __syncthreads();

    float acc[kRefDimsPerThread] = {};
    float m = -INFINITY, l = 0.0f;
    for (int32_t t0 = first; t0 <= pos; t0 += kRefTile) {
        const int32_t count = min(kRefTile, pos + 1 - t0);
        for (int32_t i = warp; i < count; i += kRefWarps) {
            const T* k = k_pool + slot(t0 + i) * kv_row + kv_off;
            float dot = 0.0f;
            for (int32_t d = lane; d < hd; d += 32) dot += q_s[d] * widen(k[d]);
            dot = warp_sum(dot);
            if (lane == 0) p_s[i] = dot * a.scale;
        }
        __syncthreads();
        float m_new = m;
        for (int32_t i = 0; i < count; ++i) m_new = fmaxf(m_new, p_s[i]);
        const float alpha = expf(m - m_new);
        __syncthreads();
        if (threadIdx.x < count) p_s[threadIdx.x] = expf(p_s[threadIdx.x] - m_new);
        __syncthreads();

        float tile_sum = 0.0f;
#pragma unroll
        for (int j = 0; j < kRefDimsPerThread; ++j) acc[j] *= alpha;
        for (int32_t i = 0; i < count; ++i) {
            const float p = p_s[i];
            const T* v = v_pool + slot(t0 + i) * kv_row + kv_off;
            tile_sum += p;
#pragma unroll
            for (int j = 0; j < kRefDimsPerThread; ++j) {
                const int32_t d = threadIdx.x + j * kRefThreads;
                if (d < hd) acc[j] += p * widen(v[d]);
            }
        }
        l = l * alpha + tile_sum;
        m = m_new;
        __syncthreads();
    }

    float* o = out + (int64_t(row) * a.heads.n_heads + h) * hd;
#pragma unroll
    for (int j = 0; j < kRefDimsPerThread; ++j) {
        const int32_t d = threadIdx.x + j * kRefThreads;
        if (d < hd) o[d] = acc[j] / l;
    }
}

// ---- 2. decode kernel (split along the keys) + combine ----------------------------------

constexpr int kDecThreads = 128;
constexpr int kDecWarps = kDecThreads / 32;
constexpr int kDecKeys = 32;                            // keys per tile (= lanes: lane j scores key j)
constexpr int kDecMaxGroup = 16;                        // q heads per kv head
constexpr int kDecHeadsPerWarp = kDecMaxGroup / kDecWarps;  // warp w owns heads w, w+4, w+8, w+12
constexpr int kDecMinSplit = 64;                        // keys per split at least (one tile of decode_bf16_kernel)
constexpr int kDecTargetBlocks = 4 * 132;               // ~4 blocks per SM of an H100/H200

struct DecodeArgs {
    HeadShape heads;
    float scale;
    int32_t window;
    int32_t split_len;   // keys per split, a multiple of kDecKeys
    int32_t num_splits;
    float* part_o;       // [num_tokens][n_heads][num_splits][head_dim]
    float* part_ml;      // [num_tokens][n_heads][num_splits][2]
    float* out;
};

struct DecodePlan {
    int32_t split_len = 0, num_splits = 1;
};

// Depends only on the step's shape (never on context lengths): graph-capture safe.
DecodePlan decode_plan(const DeviceStep& st, HeadShape heads) {
    const int64_t max_ctx = std::max<int64_t>(1, int64_t(st.max_blocks_per_seq) * st.block_size);
    const int64_t base = std::max<int64_t>(1, int64_t(st.num_tokens) * heads.n_kv_heads);
    int64_t splits = (kDecTargetBlocks + base - 1) / base;
    splits = std::min<int64_t>(splits, (max_ctx + kDecMinSplit - 1) / kDecMinSplit);
    splits = std::max<int64_t>(splits, 1);
    int64_t len = (max_ctx + splits - 1) / splits;
    len = (len + kDecKeys - 1) / kDecKeys * kDecKeys;
    DecodePlan p;
    p.split_len = int32_t(len);
    p.num_splits = int32_t((max_ctx + len - 1) / len);
    return p;
}

// K rows in shared memory are padded by one 16-byte copy (ldk = hd + kPerCopy):
// lane j reads key j's row, and the padding spreads the lanes over the banks.
template <class T>
size_t decode_smem_bytes(HeadShape heads) {
    const int32_t hd = heads.head_dim, group = heads.n_heads / heads.n_kv_heads;
    return sizeof(float) * (size_t(group) * hd + size_t(group) * kDecKeys) +
           sizeof(T) * (2 * kDecKeys * size_t(hd + kPerCopy<T>) + 2 * kDecKeys * size_t(hd));
}

template <class T>
__global__ void __launch_bounds__(kDecThreads) decode_kernel(DeviceStep st, const float* __restrict__ q,
                                                             const T* __restrict__ k_pool,
                                                             const T* __restrict__ v_pool, DecodeArgs a) {
    pdl_wait();
    extern __shared__ float4 dec_smem4[];
    constexpr int E = kPerCopy<T>;
    const int32_t row = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z;
    const int32_t hd = a.heads.head_dim, c4 = hd / 4, ldk = hd + E, n_heads = a.heads.n_heads;
    const int32_t group = n_heads / a.heads.n_kv_heads, bs = st.block_size;
    const int32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float* q_s = reinterpret_cast<float*>(dec_smem4);  // [group][hd]
    float* p_s = q_s + group * hd;                      // [group][kDecKeys]
    T* k_s = reinterpret_cast<T*>(p_s + group * kDecKeys);  // [2][kDecKeys][hd + E]
    T* v_s = k_s + 2 * kDecKeys * ldk;                      // [2][kDecKeys][hd]

    const int32_t pos = st.positions[row];
    const int32_t lo = max(window_first(pos, a.window), split * a.split_len);
    const int32_t hi = min(pos, split * a.split_len + a.split_len - 1);
    const int32_t head0 = kvh * group;
    if (lo > hi) {  // this split holds none of the row's keys
        if (a.num_splits > 1 && int32_t(threadIdx.x) < group) {
            float* ml = a.part_ml + ((int64_t(row) * n_heads + head0 + threadIdx.x) * a.num_splits + split) * 2;
            ml[0] = -INFINITY;
            ml[1] = 0.0f;
        }
        return;
    }

    const int64_t kv_row = int64_t(a.heads.n_kv_heads) * hd;
    const int32_t* table = st.block_tables + int64_t(st.row_seq[row]) * st.max_blocks_per_seq;
    const int32_t copies = hd / E;  // 16-byte copies per key
    auto load_tile = [&](int stage, int32_t t0) {
        T* ks = k_s + stage * kDecKeys * ldk;
        T* vs = v_s + stage * kDecKeys * hd;
        for (int32_t i = threadIdx.x; i < kDecKeys * copies; i += kDecThreads) {
            const int32_t key = i / copies, c = i - key * copies, t = t0 + key;
            const bool ok = t <= hi;
            int64_t off = 0;
            if (ok) off = (int64_t(table[t / bs]) * bs + t % bs) * kv_row + int64_t(kvh) * hd + c * E;
            cp_async16(ks + key * ldk + c * E, k_pool + off, ok);
            cp_async16(vs + key * hd + c * E, v_pool + off, ok);
        }
    };

    const int32_t ntiles = (hi - lo + kDecKeys) / kDecKeys;
    load_tile(0, lo);
    cp_async_commit();
    {
        const float4* qg = reinterpret_cast<const float4*>(q + (int64_t(row) * n_heads + head0) * hd);
        float4* qs4 = reinterpret_cast<float4*>(q_s);
        for (int32_t i = threadIdx.x; i < group * c4; i += kDecThreads) qs4[i] = qg[i];
    }

    float m[kDecHeadsPerWarp], l[kDecHeadsPerWarp], acc[kDecHeadsPerWarp][2][4];
#pragma unroll
    for (int hh = 0; hh < kDecHeadsPerWarp; ++hh) {
        m[hh] = -INFINITY;
        l[hh] = 0.0f;
#pragma unroll
        for (int cc = 0; cc < 2; ++cc)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[hh][cc][e] = 0.0f;
    }

    for (int32_t it = 0; it < ntiles; ++it) {
        const int32_t t0 = lo + it * kDecKeys;
        if (it + 1 < ntiles) load_tile((it + 1) & 1, t0 + kDecKeys);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        const T* ks = k_s + (it & 1) * kDecKeys * ldk;
        const T* vs = v_s + (it & 1) * kDecKeys * hd;

        if (warp < group) {
            // Scores: lane = key, the warp's heads share each K load. A load is one
            // 16-byte copy (4 floats or 8 bf16; the padded rows keep a quarter-warp's
            // 16-byte loads on distinct banks, where 8-byte bf16 loads met two-way
            // conflicts), and two sums per head halve the chain of dependent FMAs.
            float s[kDecHeadsPerWarp] = {}, s2[kDecHeadsPerWarp] = {};
            const T* krow = ks + lane * ldk;
            auto score_copy = [&](int32_t d, float (&sum)[kDecHeadsPerWarp]) {
                float kf[E];
                load_copy(krow + d, kf);
#pragma unroll
                for (int hh = 0; hh < kDecHeadsPerWarp; ++hh) {
                    const int32_t g = warp + hh * kDecWarps;
                    if (g < group) {
#pragma unroll
                        for (int e = 0; e < E; e += 4) {
                            const float4 qv = *reinterpret_cast<const float4*>(q_s + g * hd + d + e);
                            sum[hh] = fmaf(qv.x, kf[e], sum[hh]);
                            sum[hh] = fmaf(qv.y, kf[e + 1], sum[hh]);
                            sum[hh] = fmaf(qv.z, kf[e + 2], sum[hh]);
                            sum[hh] = fmaf(qv.w, kf[e + 3], sum[hh]);
                        }
                    }
                }
            };
            for (int32_t d = 0; d < hd; d += 2 * E) {
                score_copy(d, s);
                if (d + E < hd) score_copy(d + E, s2);
            }
#pragma unroll
            for (int hh = 0; hh < kDecHeadsPerWarp; ++hh) s[hh] += s2[hh];
            const bool valid = t0 + lane <= hi;  // every tile has at least its first key valid
            float alpha[kDecHeadsPerWarp];
#pragma unroll
            for (int hh = 0; hh < kDecHeadsPerWarp; ++hh) {
                const int32_t g = warp + hh * kDecWarps;
                alpha[hh] = 1.0f;
                if (g < group) {
                    const float sc = valid ? s[hh] * a.scale : -INFINITY;
                    const float m_new = fmaxf(m[hh], warp_max(sc));  // finite
                    alpha[hh] = expf(m[hh] - m_new);                 // 0 on the first tile
                    const float p = valid ? expf(sc - m_new) : 0.0f;
                    l[hh] = l[hh] * alpha[hh] + warp_sum(p);
                    m[hh] = m_new;
                    p_s[g * kDecKeys + lane] = p;
                }
            }
            __syncwarp();
            // P*V: lane = float4 column (and column + 32 for head dims over 128).
#pragma unroll
            for (int hh = 0; hh < kDecHeadsPerWarp; ++hh)
#pragma unroll
                for (int cc = 0; cc < 2; ++cc)
#pragma unroll
                    for (int e = 0; e < 4; ++e) acc[hh][cc][e] *= alpha[hh];
            const int32_t count = min(kDecKeys, hi - t0 + 1);
            for (int32_t j = 0; j < count; j += 4) {  // V and p past count are zeros
                float4 pj[kDecHeadsPerWarp];
#pragma unroll
                for (int hh = 0; hh < kDecHeadsPerWarp; ++hh) {
                    const int32_t g = warp + hh * kDecWarps;
                    pj[hh] = g < group ? *reinterpret_cast<const float4*>(p_s + g * kDecKeys + j)
                                       : make_float4(0.f, 0.f, 0.f, 0.f);
                }
#pragma unroll
                for (int cc = 0; cc < 2; ++cc) {
                    const int32_t c = lane + cc * 32;
                    if (c < c4) {
                        const float4 v0 = load4(vs + (j + 0) * hd + c * 4);
                        const float4 v1 = load4(vs + (j + 1) * hd + c * 4);
                        const float4 v2 = load4(vs + (j + 2) * hd + c * 4);
                        const float4 v3 = load4(vs + (j + 3) * hd + c * 4);
#pragma unroll
                        for (int hh = 0; hh < kDecHeadsPerWarp; ++hh) {
                            if (warp + hh * kDecWarps < group) {
                                float* o = acc[hh][cc];
                                const float4 p = pj[hh];
                                o[0] = fmaf(p.x, v0.x, o[0]); o[1] = fmaf(p.x, v0.y, o[1]);
                                o[2] = fmaf(p.x, v0.z, o[2]); o[3] = fmaf(p.x, v0.w, o[3]);
                                o[0] = fmaf(p.y, v1.x, o[0]); o[1] = fmaf(p.y, v1.y, o[1]);
                                o[2] = fmaf(p.y, v1.z, o[2]); o[3] = fmaf(p.y, v1.w, o[3]);
                                o[0] = fmaf(p.z, v2.x, o[0]); o[1] = fmaf(p.z, v2.y, o[1]);
                                o[2] = fmaf(p.z, v2.z, o[2]); o[3] = fmaf(p.z, v2.w, o[3]);
                                o[0] = fmaf(p.w, v3.x, o[0]); o[1] = fmaf(p.w, v3.y, o[1]);
                                o[2] = fmaf(p.w, v3.z, o[2]); o[3] = fmaf(p.w, v3.w, o[3]);
                            }
                        }
                    }
                }
            }
        }
        __syncthreads();  // the stage is refilled by the next iteration's load
    }

    if (warp >= group) return;
#pragma unroll
    for (int hh = 0; hh < kDecHeadsPerWarp; ++hh) {
        const int32_t g = warp + hh * kDecWarps;
        if (g >= group) continue;
        const int64_t head = int64_t(row) * n_heads + head0 + g;
        if (a.num_splits == 1) {
            const float inv = 1.0f / l[hh];
            float* o = a.out + head * hd;
#pragma unroll
            for (int cc = 0; cc < 2; ++cc) {
                const int32_t c = lane + cc * 32;
                if (c < c4)
                    *reinterpret_cast<float4*>(o + c * 4) =
                        make_float4(acc[hh][cc][0] * inv, acc[hh][cc][1] * inv, acc[hh][cc][2] * inv, acc[hh][cc][3] * inv);
            }
        } else {
            const int64_t part = head * a.num_splits + split;
            float* o = a.part_o + part * hd;
#pragma unroll
            for (int cc = 0; cc < 2; ++cc) {
                const int32_t c = lane + cc * 32;
                if (c < c4)
                    *reinterpret_cast<float4*>(o + c * 4) =
                        make_float4(acc[hh][cc][0], acc[hh][cc][1], acc[hh][cc][2], acc[hh][cc][3]);
            }
            if (lane == 0) {
                a.part_ml[part * 2] = m[hh];
                a.part_ml[part * 2 + 1] = l[hh];
            }
        }
    }
}

constexpr int kCombineThreads = kMaxHeadDim / 4;  // a float4 column each

// One block per (row, head): out = sum_s w_s acc_s / sum_s w_s l_s, w_s = exp(m_s - max m), in split order.
__global__ void __launch_bounds__(kCombineThreads) combine_kernel(DecodeArgs a) {
    pdl_wait();
    const int64_t head = blockIdx.x;
    const int32_t hd = a.heads.head_dim, c = threadIdx.x, splits = a.num_splits;
    const float* ml = a.part_ml + head * splits * 2;
    float m_max = -INFINITY;
    for (int32_t s = 0; s < splits; ++s) m_max = fmaxf(m_max, ml[2 * s]);
    float total = 0.0f;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    const bool active = c < hd / 4;
    for (int32_t s = 0; s < splits; ++s) {
        const float ms = ml[2 * s];
        if (ms == -INFINITY) continue;  // an empty split: its acc was never written
        const float w = expf(ms - m_max);
        total = fmaf(w, ml[2 * s + 1], total);
        if (active) {
            const float4 p = *reinterpret_cast<const float4*>(a.part_o + (head * splits + s) * hd + c * 4);
            acc.x = fmaf(w, p.x, acc.x);
            acc.y = fmaf(w, p.y, acc.y);
            acc.z = fmaf(w, p.z, acc.z);
            acc.w = fmaf(w, p.w, acc.w);
        }
    }
    if (active) {
        const float inv = 1.0f / total;
        *reinterpret_cast<float4*>(a.out + head * hd + c * 4) =
            make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
    }
}

// ---- 3. prefill kernel (tensor cores, 3xTF32) -------------------------------------------

constexpr int kPreThreads = 128;
constexpr int kPreWarps = kPreThreads / 32;
constexpr int kPreVecs = 16 * kPreWarps;  // (row, head) pairs per block: 16 per warp (one m16 fragment)
constexpr int kPreKeys = 32;              // keys per K/V tile
constexpr int kPreNFrag = kPreKeys / 8;

__device__ __forceinline__ uint32_t to_tf32(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
}
__device__ __forceinline__ void split_tf32(float x, uint32_t& big, uint32_t& small) {
    big = to_tf32(x);
    small = to_tf32(x - __uint_as_float(big));
}
__device__ __forceinline__ void mma_tf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// c += a * b with a and b split into tf32 big + small parts (the small*small term dropped).
__device__ __forceinline__ void mma_3xtf32(float (&c)[4], const float (&a)[4], float b0, float b1) {
    uint32_t ab[4], as[4], bb0, bs0, bb1, bs1;
#pragma unroll
    for (int i = 0; i < 4; ++i) split_tf32(a[i], ab[i], as[i]);
    split_tf32(b0, bb0, bs0);
    split_tf32(b1, bb1, bs1);
    mma_tf32(c, as, bb0, bb1);
    mma_tf32(c, ab, bs0, bs1);
    mma_tf32(c, ab, bb0, bb1);
}

// Shared memory rows of Q are hd8 + 4 floats (hd8 = head_dim rounded up to 8):
// a stride of 4 mod 8 words makes the fragment loads conflict-free. K and V
// rows are hd8 + one 16-byte copy of pool elements.
template <class T>
size_t prefill_smem_bytes(HeadShape heads) {
    const size_t hd8 = size_t((heads.head_dim + 7) / 8 * 8);
    return sizeof(float) * (hd8 + 4) * kPreVecs + sizeof(T) * (hd8 + kPerCopy<T>) * 2 * 2 * kPreKeys;
}

struct PrefillArgs {
    HeadShape heads;
    float scale;
    int32_t window;
    float* out;
};

// The two fragment rows of this thread in a prefill block (vectors warp*16 + g8
// and + 8): their positions and window starts, the keys the warp needs
// (w_lo..w_hi) and those the whole block needs (lo..hi). range_s: 2 ints of
// shared memory; every thread of the block must call this.
struct PrefillRows {
    int32_t pos[2], first[2];
    int32_t w_lo, w_hi, lo, hi;
};
__device__ __forceinline__ PrefillRows prefill_rows(const DeviceStep& st, int32_t window, int32_t row0, int32_t vec0,
                                                    int32_t nvec, int32_t group, int32_t* range_s) {
    const int32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32, g8 = lane / 4;
    PrefillRows r;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int32_t v = warp * 16 + g8 + i * 8;
        if (v < nvec) {
            r.pos[i] = st.positions[row0 + (vec0 + v) / group];
            r.first[i] = window_first(r.pos[i], window);
        } else {
            r.pos[i] = -1;  // no key is <= -1: the row is fully masked
            r.first[i] = INT32_MAX;
        }
    }
    r.w_lo = min(r.first[0], r.first[1]);
    r.w_hi = max(r.pos[0], r.pos[1]);
    for (int offset = 16; offset > 0; offset /= 2) {
        r.w_lo = min(r.w_lo, __shfl_xor_sync(0xffffffffu, r.w_lo, offset));
        r.w_hi = max(r.w_hi, __shfl_xor_sync(0xffffffffu, r.w_hi, offset));
    }
    if (threadIdx.x == 0) {
        range_s[0] = INT32_MAX;
        range_s[1] = -1;
    }
    __syncthreads();
    if (lane == 0) {
        atomicMin(&range_s[0], r.w_lo);
        atomicMax(&range_s[1], r.w_hi);
    }
    __syncthreads();
    r.lo = range_s[0];
    r.hi = range_s[1];
    return r;
}

// One tile of scores S (16 rows x 8 kNFrag keys, the m16n8 accumulator layout:
// rows g8 in elements 0, 1 and g8 + 8 in elements 2, 3) through the masks and
// the online softmax: S becomes exp(S - m), and m, l and the output O are
// rescaled to the new maxima.
template <int kNFrag, int kOFrag>
__device__ __forceinline__ void online_softmax(float (&s)[kNFrag][4], float (&o)[kOFrag][4], float (&m)[2],
                                               float (&l)[2], const PrefillRows& rows, int32_t t0, int t4,
                                               float scale) {
    float tmax[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int f = 0; f < kNFrag; ++f)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int i = e / 2;
            const int32_t key = t0 + f * 8 + 2 * t4 + (e & 1);
            const bool ok = key >= rows.first[i] && key <= rows.pos[i];
            s[f][e] = ok ? s[f][e] * scale : -INFINITY;
            tmax[i] = fmaxf(tmax[i], s[f][e]);
        }
    float alpha[2], m_use[2], tsum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        tmax[i] = fmaxf(tmax[i], __shfl_xor_sync(0xffffffffu, tmax[i], 1));
        tmax[i] = fmaxf(tmax[i], __shfl_xor_sync(0xffffffffu, tmax[i], 2));
        const float m_new = fmaxf(m[i], tmax[i]);
        m_use[i] = m_new == -INFINITY ? 0.0f : m_new;  // a row with no key yet stays at zero
        alpha[i] = expf(m[i] - m_use[i]);
        m[i] = m_new;
    }
#pragma unroll
    for (int f = 0; f < kNFrag; ++f)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            s[f][e] = expf(s[f][e] - m_use[e / 2]);
            tsum[e / 2] += s[f][e];
        }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        tsum[i] += __shfl_xor_sync(0xffffffffu, tsum[i], 1);
        tsum[i] += __shfl_xor_sync(0xffffffffu, tsum[i], 2);
        l[i] = l[i] * alpha[i] + tsum[i];
    }
#pragma unroll
    for (int f = 0; f < kOFrag; ++f) {
        o[f][0] *= alpha[0];
        o[f][1] *= alpha[0];
        o[f][2] *= alpha[1];
        o[f][3] *= alpha[1];
    }
}

// O / l into the output rows: element e of fragment f is row g8 + 8*(e/2),
// column f*8 + 2*t4 + (e&1).
template <int kOFrag>
__device__ __forceinline__ void store_prefill_output(const float (&o)[kOFrag][4], const float (&l)[2],
                                                     const PrefillArgs& a, int32_t row0, int32_t vec0, int32_t nvec,
                                                     int32_t group, int32_t kvh) {
    const int32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32, g8 = lane / 4, t4 = lane % 4;
    const int32_t hd = a.heads.head_dim;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int32_t v = warp * 16 + g8 + i * 8;
        if (v >= nvec) continue;
        const int32_t pv = vec0 + v, r = row0 + pv / group, g = pv % group;
        float* out = a.out + (int64_t(r) * a.heads.n_heads + kvh * group + g) * hd;
        const float inv = 1.0f / l[i];
#pragma unroll
        for (int f = 0; f < kOFrag; ++f) {
            const int32_t col = f * 8 + 2 * t4;
            if (col < hd) *reinterpret_cast<float2*>(out + col) = make_float2(o[f][2 * i] * inv, o[f][2 * i + 1] * inv);
        }
    }
}

// HDP: head_dim rounded up to 8 is at most HDP (64, 128 or 256): the register arrays' size.
template <int HDP, class T>
__global__ void __launch_bounds__(kPreThreads) prefill_kernel(DeviceStep st, const float* __restrict__ q,
                                                              const T* __restrict__ k_pool,
                                                              const T* __restrict__ v_pool, PrefillArgs a) {
    pdl_wait();
    constexpr int kOFrag = HDP / 8, E = kPerCopy<T>;
    extern __shared__ float4 pre_smem4[];
    __shared__ int32_t range_s[2];
    const int32_t tile = blockIdx.x, kvh = blockIdx.y, chunk = blockIdx.z;
    const int32_t hd = a.heads.head_dim, hd8 = (hd + 7) / 8 * 8, ld = hd8 + 4, n_heads = a.heads.n_heads;
    const int32_t group = n_heads / a.heads.n_kv_heads, bs = st.block_size;
    const int32_t seq = st.attn_tiles[3 * tile], row0 = st.attn_tiles[3 * tile + 1], count = st.attn_tiles[3 * tile + 2];
    const int32_t vec0 = chunk * kPreVecs;
    if (vec0 >= count * group) return;
    const int32_t nvec = min(kPreVecs, count * group - vec0);
    const int32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32, g8 = lane / 4, t4 = lane % 4;
    const int32_t ldt = hd8 + E;                        // K/V rows, in pool elements
    float* q_s = reinterpret_cast<float*>(pre_smem4);  // [kPreVecs][ld]
    T* k_s = reinterpret_cast<T*>(q_s + kPreVecs * ld);  // [2][kPreKeys][ldt]
    T* v_s = k_s + 2 * kPreKeys * ldt;                   // [2][kPreKeys][ldt]

    const PrefillRows rows = prefill_rows(st, a.window, row0, vec0, nvec, group, range_s);
    const int32_t lo = rows.lo, hi = rows.hi;

    const int64_t kv_row = int64_t(a.heads.n_kv_heads) * hd;
    const int32_t* table = st.block_tables + int64_t(seq) * st.max_blocks_per_seq;
    const int32_t c8 = hd8 / 4, c4 = hd / 4;
    // 16-byte copies per key row: those past head_dim (up to hd8) are zero-filled.
    const int32_t copies8 = hd8 / E, copies = hd / E;
    auto load_tile = [&](int stage, int32_t t0) {
        T* ks = k_s + stage * kPreKeys * ldt;
        T* vs = v_s + stage * kPreKeys * ldt;
        for (int32_t i = threadIdx.x; i < kPreKeys * copies8; i += kPreThreads) {
            const int32_t key = i / copies8, c = i - key * copies8, t = t0 + key;
            const bool ok = t <= hi && c < copies;
            int64_t off = 0;
            if (ok) off = (int64_t(table[t / bs]) * bs + t % bs) * kv_row + int64_t(kvh) * hd + c * E;
            cp_async16(ks + key * ldt + c * E, k_pool + off, ok);
            cp_async16(vs + key * ldt + c * E, v_pool + off, ok);
        }
    };

    const int32_t ntiles = (hi - lo + kPreKeys) / kPreKeys;
    load_tile(0, lo);
    cp_async_commit();
    // Q: vector v = (row (vec0+v)/group, head (vec0+v)%group); zeros past nvec and past hd.
    for (int32_t i = threadIdx.x; i < kPreVecs * c8; i += kPreThreads) {
        const int32_t v = i / c8, c = i - v * c8;
        float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
        if (v < nvec && c < c4) {
            const int32_t pv = vec0 + v, r = row0 + pv / group, g = pv % group;
            x = *reinterpret_cast<const float4*>(q + (int64_t(r) * n_heads + kvh * group + g) * hd + c * 4);
        }
        *reinterpret_cast<float4*>(q_s + v * ld + c * 4) = x;
    }

    float o[kOFrag][4];
#pragma unroll
    for (int f = 0; f < kOFrag; ++f) o[f][0] = o[f][1] = o[f][2] = o[f][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    const float* qw = q_s + warp * 16 * ld;

    for (int32_t it = 0; it < ntiles; ++it) {
        const int32_t t0 = lo + it * kPreKeys;
        if (it + 1 < ntiles) load_tile((it + 1) & 1, t0 + kPreKeys);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        const T* ks = k_s + (it & 1) * kPreKeys * ldt;
        const T* vs = v_s + (it & 1) * kPreKeys * ldt;

        if (t0 <= rows.w_hi && t0 + kPreKeys - 1 >= rows.w_lo) {  // warp-uniform
            // S = Q K^T: 16 x 32 per warp.
            float s[kPreNFrag][4];
#pragma unroll
            for (int f = 0; f < kPreNFrag; ++f) s[f][0] = s[f][1] = s[f][2] = s[f][3] = 0.0f;
#pragma unroll
            for (int kb = 0; kb < HDP / 8; ++kb) {
                if (kb * 8 < hd8) {
                    const float* qa = qw + kb * 8 + t4;
                    const float af[4] = {qa[g8 * ld], qa[(g8 + 8) * ld], qa[g8 * ld + 4], qa[(g8 + 8) * ld + 4]};
#pragma unroll
                    for (int f = 0; f < kPreNFrag; ++f) {
                        const T* kb_ = ks + (f * 8 + g8) * ldt + kb * 8 + t4;
                        mma_3xtf32(s[f], af, widen(kb_[0]), widen(kb_[4]));
                    }
                }
            }
            online_softmax(s, o, m, l, rows, t0, t4, a.scale);
            // O += P V. The accumulator layout of S (columns 2t, 2t+1) becomes
            // the A layout (columns t, t+4) by reading keys in the order
            // 0,2,4,6,1,3,5,7 within each 8: A's column t is key 2t, column t+4
            // is key 2t+1, and V's B rows follow the same order.
            // Each tile's P V goes into a fresh accumulator added to O with an
            // fp32 add: the tensor cores' own accumulation truncates, which
            // over thousands of keys would add up to a bias (~1e-5).
#pragma unroll
            for (int f = 0; f < kOFrag; ++f) {
                if (f * 8 >= hd8) continue;
                float tile_o[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                for (int kb = 0; kb < kPreNFrag; ++kb) {
                    const float pa[4] = {s[kb][0], s[kb][2], s[kb][1], s[kb][3]};
                    const T* vb = vs + (kb * 8 + 2 * t4) * ldt + g8 + f * 8;
                    mma_3xtf32(tile_o, pa, widen(vb[0]), widen(vb[ldt]));
                }
#pragma unroll
                for (int e = 0; e < 4; ++e) o[f][e] += tile_o[e];
            }
        }
        __syncthreads();
    }

    store_prefill_output(o, l, a, row0, vec0, nvec, group, kvh);
}


// ---- 4. prefill over a bf16 pool (tensor cores, bf16 m16n8k16) ---------------------------
//
// The same blocking as prefill_kernel, with the operands the pool already holds:
// K and V are bf16, Q is rounded to bf16 as it is staged, and P is rounded to
// bf16 before P V (as FlashAttention-2 does); the products accumulate in fp32.
// One m16n8k16 does the work of six m16n8k8 tf32 of the 3xTF32 kernel. The
// accumulator of S (row g8, keys 2t4 and 2t4 + 1 of each 8) is already the A
// fragment of P V (rows g8 / g8 + 8, keys 2t4, 2t4 + 1 and + 8, + 9 of each 16),
// so P never leaves the registers.


// Rows of Q, K and V in shared memory are hd16 + 8 bf16 (hd16 = head_dim rounded up
// to 16; the padding keeps rows 16-byte aligned for cp.async).
size_t prefill_bf16_smem_bytes(HeadShape heads) {
    const size_t ld = size_t((heads.head_dim + 15) / 16 * 16 + 8);
    return sizeof(bf16) * ld * (kPreVecs + 2 * 2 * kPreKeys);
}

// HDP: head_dim rounded up to 16 is at most HDP (64, 128 or 256).
template <int HDP>
__global__ void __launch_bounds__(kPreThreads) prefill_bf16_kernel(DeviceStep st, const float* __restrict__ q,
                                                                   const bf16* __restrict__ k_pool,
                                                                   const bf16* __restrict__ v_pool, PrefillArgs a) {
    pdl_wait();
    constexpr int kOFrag = HDP / 8;
    extern __shared__ float4 pre16_smem4[];
    __shared__ int32_t range_s[2];
    const int32_t tile = blockIdx.x, kvh = blockIdx.y, chunk = blockIdx.z;
    const int32_t hd = a.heads.head_dim, hd16 = (hd + 15) / 16 * 16, ld = hd16 + 8, n_heads = a.heads.n_heads;
    const int32_t group = n_heads / a.heads.n_kv_heads, bs = st.block_size;
    const int32_t seq = st.attn_tiles[3 * tile], row0 = st.attn_tiles[3 * tile + 1], count = st.attn_tiles[3 * tile + 2];
    const int32_t vec0 = chunk * kPreVecs;
    if (vec0 >= count * group) return;
    const int32_t nvec = min(kPreVecs, count * group - vec0);
    const int32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32, t4 = lane % 4;
    bf16* q_s = reinterpret_cast<bf16*>(pre16_smem4);  // [kPreVecs][ld]
    bf16* k_s = q_s + kPreVecs * ld;                    // [2][kPreKeys][ld]
    bf16* v_s = k_s + 2 * kPreKeys * ld;                // [2][kPreKeys][ld]

    const PrefillRows rows = prefill_rows(st, a.window, row0, vec0, nvec, group, range_s);
    const int32_t lo = rows.lo, hi = rows.hi;

    const KvTileSource src{st.block_tables + int64_t(seq) * st.max_blocks_per_seq, bs,
                           int64_t(a.heads.n_kv_heads) * hd, kvh, hd, hd16, hi};
    auto load_tile = [&](int stage, int32_t t0) {
        load_kv_tile_bf16<kPreKeys, kPreThreads>(src, k_pool, v_pool, t0, k_s + stage * kPreKeys * ld, v_s + stage * kPreKeys * ld, ld);
    };

    const int32_t ntiles = (hi - lo + kPreKeys) / kPreKeys;
    load_tile(0, lo);
    cp_async_commit();
    // Q, rounded to bf16: vector v = (row (vec0+v)/group, head (vec0+v)%group); zeros past nvec and head_dim.
    const int32_t pairs16 = hd16 / 2;
    for (int32_t i = threadIdx.x; i < kPreVecs * pairs16; i += kPreThreads) {
        const int32_t v = i / pairs16, c = 2 * (i - v * pairs16);
        float x0 = 0.0f, x1 = 0.0f;
        if (v < nvec && c < hd) {  // head_dim is a multiple of 8: both or neither
            const int32_t pv = vec0 + v, r = row0 + pv / group, g = pv % group;
            const float2 x = *reinterpret_cast<const float2*>(q + (int64_t(r) * n_heads + kvh * group + g) * hd + c);
            x0 = x.x, x1 = x.y;
        }
        *reinterpret_cast<uint32_t*>(q_s + v * ld + c) = pack_bf16(x0, x1);
    }

    float o[kOFrag][4];
#pragma unroll
    for (int f = 0; f < kOFrag; ++f) o[f][0] = o[f][1] = o[f][2] = o[f][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    // ldmatrix row addresses (lane j: row j % 8 of matrix j / 8), as in decode_bf16_kernel.
    const int32_t q_row = (lane & 7) + ((lane >> 3) & 1) * 8, q_dim = (lane >> 4) * 8;  // Q: (row, head) pairs x dims
    const int32_t k_key = (lane & 7) + (lane >> 4) * 8, k_dim = ((lane >> 3) & 1) * 8;  // K: keys x dims
    const int32_t v_key = (lane & 7) + ((lane >> 3) & 1) * 8, v_dim = (lane >> 4) * 8;  // V: keys x dims, transposed
    const bf16* qw = q_s + (warp * 16 + q_row) * ld + q_dim;
    // The warp's Q fragments stay in registers for every tile up to head_dim 128
    // (32 registers); at 256 they are reloaded per tile.
    constexpr bool kQInRegs = HDP <= 128;
    uint32_t qf[kQInRegs ? HDP / 16 : 1][4];
    if constexpr (kQInRegs) {
        __syncthreads();
#pragma unroll
        for (int kb = 0; kb < HDP / 16; ++kb)
            if (kb * 16 < hd16) ldmatrix_x4(qf[kb], qw + kb * 16);
    }

    for (int32_t it = 0; it < ntiles; ++it) {
        const int32_t t0 = lo + it * kPreKeys;
        if (it + 1 < ntiles) load_tile((it + 1) & 1, t0 + kPreKeys);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        const bf16* ks = k_s + (it & 1) * kPreKeys * ld;
        const bf16* vs = v_s + (it & 1) * kPreKeys * ld;

        if (t0 <= rows.w_hi && t0 + kPreKeys - 1 >= rows.w_lo) {  // warp-uniform
            // S = Q K^T: 16 x 32 per warp, 16 dims per mma; one ldmatrix.x4 gives
            // the B of two n-fragments (16 keys).
            float s[kPreNFrag][4];
#pragma unroll
            for (int f = 0; f < kPreNFrag; ++f) s[f][0] = s[f][1] = s[f][2] = s[f][3] = 0.0f;
#pragma unroll
            for (int kb = 0; kb < HDP / 16; ++kb) {
                if (kb * 16 < hd16) {
                    uint32_t af[4];
                    if constexpr (kQInRegs) {
#pragma unroll
                        for (int e = 0; e < 4; ++e) af[e] = qf[kb][e];
                    } else {
                        ldmatrix_x4(af, qw + kb * 16);
                    }
#pragma unroll
                    for (int f = 0; f < kPreNFrag; f += 2) {
                        uint32_t kf[4];
                        ldmatrix_x4(kf, ks + (f * 8 + k_key) * ld + kb * 16 + k_dim);
                        mma_bf16(s[f], af, kf[0], kf[1]);
                        mma_bf16(s[f + 1], af, kf[2], kf[3]);
                    }
                }
            }
            online_softmax(s, o, m, l, rows, t0, t4, a.scale);
            // O += P V, 16 keys per mma: P's A fragment is S's accumulator, two n-frags of keys.
            uint32_t pa[kPreKeys / 16][4];
#pragma unroll
            for (int kc = 0; kc < kPreKeys / 16; ++kc) {
                pa[kc][0] = pack_bf16(s[2 * kc][0], s[2 * kc][1]);
                pa[kc][1] = pack_bf16(s[2 * kc][2], s[2 * kc][3]);
                pa[kc][2] = pack_bf16(s[2 * kc + 1][0], s[2 * kc + 1][1]);
                pa[kc][3] = pack_bf16(s[2 * kc + 1][2], s[2 * kc + 1][3]);
            }
            // One ldmatrix.x4.trans gives V's B for 16 keys and two n-fragments (16 dims).
#pragma unroll
            for (int f = 0; f < kOFrag; f += 2) {
                if (f * 8 >= hd16) continue;
                float t0o[4] = {0.0f, 0.0f, 0.0f, 0.0f}, t1o[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                for (int kc = 0; kc < kPreKeys / 16; ++kc) {
                    uint32_t vf[4];
                    ldmatrix_x4_trans(vf, vs + (kc * 16 + v_key) * ld + f * 8 + v_dim);
                    mma_bf16(t0o, pa[kc], vf[0], vf[1]);
                    mma_bf16(t1o, pa[kc], vf[2], vf[3]);
                }
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    o[f][e] += t0o[e];
                    o[f + 1][e] += t1o[e];
                }
            }
        }
        __syncthreads();
    }

    store_prefill_output(o, l, a, row0, vec0, nvec, group, kvh);
}

// ---- 5. decode over a bf16 pool (tensor cores) ------------------------------------------
//
// decode_kernel's blocking (one block per (row, kv head, split), partials merged
// by combine_kernel) with the scores and P V on bf16 m16n8k16 tensor cores. The
// GQA group's heads are the 16 rows of the A operand (4 of 16 used for a group
// of 4: the tensor cores have throughput to spare; what counts is the
// instruction count, which held the scalar kernel at 56% of the SM's issue
// rate and 20% of HBM bandwidth). The block copies tiles of 64 keys; warp w
// takes keys 16w..16w+15 of each with its own online softmax, and the four
// warps' (m, l, O) merge in shared memory at the end. K and V fragments come
// from ldmatrix (.trans for V, whose rows are keys). Q is split into two bf16
// parts, hi = bf16(q) and lo = bf16(q - hi), and S = hi K^T + lo K^T: the pool's
// K is bf16 already, so the scores are those of fp32 Q to ~2^-16. Rounding Q
// alone (as prefill_bf16_kernel does) errs by ~2^-9 of each score, and a
// trained model's decode scores reach tens: the softmax moved enough to change
// stories260K's greedy tokens against the CPU. P is rounded to bf16 (it lies
// in [0, 1]; its error is relative, not scaled by the scores).
constexpr int kDecMmaKeys = 64;                           // keys per tile
constexpr int kDecMmaWarpKeys = kDecMmaKeys / kDecWarps;  // 16: two n-fragments of S, one k-step of P V


// Rows of Q, K and V are hd16 + 8 bf16: 16-byte aligned for cp.async and
// ldmatrix, and 8 rows at that stride fall on distinct banks. Q keeps only the
// group's rows (hi, then lo) and one row of zeros, which the A operand's other
// rows point at: 72 KB a block at head_dim 128 and a group of 4, three blocks
// an SM (16 rows of each part would be 78 KB, and two). After the loop the same
// memory holds the warps' partial outputs for the merge.
size_t decode_bf16_smem_bytes(HeadShape heads) {
    const size_t ld = size_t((heads.head_dim + 15) / 16 * 16 + 8);
    const size_t group = size_t(heads.n_heads / heads.n_kv_heads);
    const size_t tiles = sizeof(bf16) * ld * (2 * group + 1 + 2 * 2 * kDecMmaKeys);
    const size_t merge = sizeof(float) * kDecWarps * group * (size_t(heads.head_dim) + 2);
    return std::max(tiles, merge);
}

// HDP: head_dim rounded up to 16 is at most HDP (64, 128 or 256).
template <int HDP>
__global__ void __launch_bounds__(kDecThreads) decode_bf16_kernel(DeviceStep st, const float* __restrict__ q,
                                                                  const bf16* __restrict__ k_pool,
                                                                  const bf16* __restrict__ v_pool, DecodeArgs a) {
    pdl_wait();
    constexpr int kOFrag = HDP / 8, kNFrag = kDecMmaWarpKeys / 8;
    extern __shared__ float4 dec16_smem4[];
    const int32_t row = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z;
    const int32_t hd = a.heads.head_dim, hd16 = (hd + 15) / 16 * 16, ld = hd16 + 8, n_heads = a.heads.n_heads;
    const int32_t group = n_heads / a.heads.n_kv_heads, bs = st.block_size, head0 = kvh * group;
    const int32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32, g8 = lane / 4, t4 = lane % 4;
    bf16* q_s = reinterpret_cast<bf16*>(dec16_smem4);  // [group][ld] bf16(q), [group][ld] bf16(q - bf16(q)), [ld] zeros
    bf16* k_s = q_s + (2 * group + 1) * ld;             // [2][kDecMmaKeys][ld]
    bf16* v_s = k_s + 2 * kDecMmaKeys * ld;             // [2][kDecMmaKeys][ld]

    const int32_t pos = st.positions[row];
    const int32_t lo = max(window_first(pos, a.window), split * a.split_len);
    const int32_t hi = min(pos, split * a.split_len + a.split_len - 1);
    if (lo > hi) {  // this split holds none of the row's keys
        if (a.num_splits > 1 && int32_t(threadIdx.x) < group) {
            float* ml = a.part_ml + ((int64_t(row) * n_heads + head0 + threadIdx.x) * a.num_splits + split) * 2;
            ml[0] = -INFINITY;
            ml[1] = 0.0f;
        }
        return;
    }

    const KvTileSource src{st.block_tables + int64_t(st.row_seq[row]) * st.max_blocks_per_seq, bs,
                           int64_t(a.heads.n_kv_heads) * hd, kvh, hd, hd16, hi};
    auto load_tile = [&](int stage, int32_t t0) {
        load_kv_tile_bf16<kDecMmaKeys, kDecThreads>(src, k_pool, v_pool, t0, k_s + stage * kDecMmaKeys * ld, v_s + stage * kDecMmaKeys * ld, ld);
    };

    const int32_t ntiles = (hi - lo + kDecMmaKeys) / kDecMmaKeys;
    load_tile(0, lo);
    cp_async_commit();
    // Q: row r of the A operand is head head0 + r, as hi + lo; rows past the
    // group read the zero row, and columns past head_dim are zeros.
    const int32_t pairs16 = hd16 / 2;
    for (int32_t i = threadIdx.x; i < (group + 1) * pairs16; i += kDecThreads) {
        const int32_t r = i / pairs16, c = 2 * (i - r * pairs16);
        if (r == group) {
            *reinterpret_cast<uint32_t*>(q_s + 2 * group * ld + c) = 0u;
            continue;
        }
        float2 x = make_float2(0.0f, 0.0f);
        if (c < hd) x = *reinterpret_cast<const float2*>(q + (int64_t(row) * n_heads + head0 + r) * hd + c);
        const __nv_bfloat162 hi = __floats2bfloat162_rn(x.x, x.y);
        *reinterpret_cast<__nv_bfloat162*>(q_s + r * ld + c) = hi;
        *reinterpret_cast<uint32_t*>(q_s + (group + r) * ld + c) =
            pack_bf16(x.x - __low2float(hi), x.y - __high2float(hi));
    }

    // Every row of the fragment is the same query: keys lo..hi are its keys in this split.
    PrefillRows rows{};
    rows.pos[0] = rows.pos[1] = hi;
    rows.first[0] = rows.first[1] = lo;
    float o[kOFrag][4];
#pragma unroll
    for (int f = 0; f < kOFrag; ++f) o[f][0] = o[f][1] = o[f][2] = o[f][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    // ldmatrix row addresses: lane j points at row j % 8 of matrix j / 8.
    const int32_t q_row = (lane & 7) + ((lane >> 3) & 1) * 8, q_dim = (lane >> 4) * 8;  // Q: heads x dims
    const bf16* q_hi = q_s + (q_row < group ? q_row : 2 * group) * ld + q_dim;
    const bf16* q_lo = q_s + (q_row < group ? group + q_row : 2 * group) * ld + q_dim;
    const int32_t k_key = (lane & 7) + (lane >> 4) * 8, k_dim = ((lane >> 3) & 1) * 8;  // K: keys x dims
    const int32_t v_key = (lane & 7) + ((lane >> 3) & 1) * 8, v_dim = (lane >> 4) * 8;  // V: keys x dims, transposed

    for (int32_t it = 0; it < ntiles; ++it) {
        const int32_t t0 = lo + it * kDecMmaKeys;
        if (it + 1 < ntiles) load_tile((it + 1) & 1, t0 + kDecMmaKeys);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        const int32_t w0 = t0 + warp * kDecMmaWarpKeys;  // the warp's first key
        if (w0 <= hi) {                                   // warp-uniform
            const bf16* ks = k_s + ((it & 1) * kDecMmaKeys + warp * kDecMmaWarpKeys) * ld;
            const bf16* vs = v_s + ((it & 1) * kDecMmaKeys + warp * kDecMmaWarpKeys) * ld;
            // S = Q K^T: 16 heads x 16 keys; one ldmatrix.x4 gives both n-fragments' B.
            float s[kNFrag][4] = {};
#pragma unroll
            for (int kb = 0; kb < HDP / 16; ++kb) {
                if (kb * 16 < hd16) {
                    uint32_t kf[4];
                    ldmatrix_x4(kf, ks + k_key * ld + kb * 16 + k_dim);
#pragma unroll
                    for (int part = 0; part < 2; ++part) {  // hi, then lo
                        uint32_t af[4];
                        ldmatrix_x4(af, (part ? q_lo : q_hi) + kb * 16);
                        mma_bf16(s[0], af, kf[0], kf[1]);
                        mma_bf16(s[1], af, kf[2], kf[3]);
                    }
                }
            }
            online_softmax(s, o, m, l, rows, w0, t4, a.scale);
            // O += P V: P's A fragment is S's accumulator; one ldmatrix.x4.trans
            // gives the B of two n-fragments (16 dims).
            const uint32_t pa[4] = {pack_bf16(s[0][0], s[0][1]), pack_bf16(s[0][2], s[0][3]),
                                    pack_bf16(s[1][0], s[1][1]), pack_bf16(s[1][2], s[1][3])};
#pragma unroll
            for (int f = 0; f < kOFrag; f += 2) {
                if (f * 8 >= hd16) continue;
                uint32_t vf[4];
                ldmatrix_x4_trans(vf, vs + v_key * ld + f * 8 + v_dim);
                // A fresh accumulator per tile, added in fp32 (see prefill_kernel).
                float t0o[4] = {}, t1o[4] = {};
                mma_bf16(t0o, pa, vf[0], vf[1]);
                mma_bf16(t1o, pa, vf[2], vf[3]);
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    o[f][e] += t0o[e];
                    o[f + 1][e] += t1o[e];
                }
            }
        }
        __syncthreads();  // the stage is refilled by the next iteration's load
    }

    // Merge the warps: each writes its rows' m, l and unnormalised O, then the
    // block combines them per (head, column) like combine_kernel does splits.
    float* o_s = reinterpret_cast<float*>(dec16_smem4);  // [kDecWarps][group][hd]
    float* ml_s = o_s + kDecWarps * group * hd;          // [kDecWarps][group][2]
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int32_t r = g8 + 8 * i;
        if (r >= group) continue;
        float* orow = o_s + (warp * group + r) * hd;
#pragma unroll
        for (int f = 0; f < kOFrag; ++f) {
            const int32_t col = f * 8 + 2 * t4;
            if (col < hd) *reinterpret_cast<float2*>(orow + col) = make_float2(o[f][2 * i], o[f][2 * i + 1]);
        }
        if (t4 == 0) {
            ml_s[(warp * group + r) * 2] = m[i];
            ml_s[(warp * group + r) * 2 + 1] = l[i];
        }
    }
    __syncthreads();
    for (int32_t idx = threadIdx.x; idx < group * hd; idx += kDecThreads) {
        const int32_t r = idx / hd, c = idx - r * hd;
        float m_max = -INFINITY;
        for (int w = 0; w < kDecWarps; ++w) m_max = fmaxf(m_max, ml_s[(w * group + r) * 2]);
        float sum_l = 0.0f, sum_o = 0.0f;
        for (int w = 0; w < kDecWarps; ++w) {
            const float mw = ml_s[(w * group + r) * 2];
            if (mw == -INFINITY) continue;  // a warp that saw none of the keys
            const float e = expf(mw - m_max);
            sum_l += e * ml_s[(w * group + r) * 2 + 1];
            sum_o += e * o_s[(w * group + r) * hd + c];
        }
        const int64_t head = int64_t(row) * n_heads + head0 + r;
        if (a.num_splits == 1) {
            a.out[head * hd + c] = sum_o / sum_l;
        } else {
            const int64_t part = head * a.num_splits + split;
            a.part_o[part * hd + c] = sum_o;
            if (c == 0) {
                a.part_ml[part * 2] = m_max;
                a.part_ml[part * 2 + 1] = sum_l;
            }
        }
    }
}

// The fast kernels copy whole 16-byte pieces of each K/V row and read q as
// float4: head_dim a multiple of 4 floats (8 bf16) and 16-byte aligned arrays.
template <class T>
bool fast_path_ok(const float* q, const T* k_pool, const T* v_pool, HeadShape heads, const float* out) {
    return heads.head_dim % kPerCopy<T> == 0 && heads.head_dim <= kMaxHeadDim && is_aligned(q, 16) &&
           is_aligned(k_pool, 16) && is_aligned(v_pool, 16) && is_aligned(out, 16);
}
bool use_decode(const DeviceStep& st, HeadShape heads) {
    return st.num_tokens == st.num_seqs && heads.n_heads / heads.n_kv_heads <= kDecMaxGroup;
}

// Opts in to more than 48 KB of dynamic shared memory, once per kernel.
template <class Kernel>
void allow_smem(Kernel kernel, size_t bytes, size_t& allowed) {
    if (bytes <= 48 * 1024 || bytes <= allowed) return;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
    allowed = bytes;
}

template <int HDP, class T>
void launch_prefill(const DeviceStep& st, const float* q, const T* k_pool, const T* v_pool, HeadShape heads,
                    float scale, int32_t window, float* out, cudaStream_t stream) {
    static size_t allowed = 0;
    const size_t smem = prefill_smem_bytes<T>(heads);
    allow_smem(prefill_kernel<HDP, T>, smem, allowed);
    const int32_t group = heads.n_heads / heads.n_kv_heads;
    const dim3 grid(st.num_attn_tiles, heads.n_kv_heads, (kAttnTileRows * group + kPreVecs - 1) / kPreVecs);
    launch_pdl(prefill_kernel<HDP, T>, grid, kPreThreads, smem, stream, st, q, k_pool, v_pool,
                                                                PrefillArgs{heads, scale, window, out});
}

template <int HDP>
void launch_prefill_bf16(const DeviceStep& st, const float* q, const bf16* k_pool, const bf16* v_pool, HeadShape heads,
                         float scale, int32_t window, float* out, cudaStream_t stream) {
    static size_t allowed = 0;
    const size_t smem = prefill_bf16_smem_bytes(heads);
    allow_smem(prefill_bf16_kernel<HDP>, smem, allowed);
    const int32_t group = heads.n_heads / heads.n_kv_heads;
    const dim3 grid(st.num_attn_tiles, heads.n_kv_heads, (kAttnTileRows * group + kPreVecs - 1) / kPreVecs);
    launch_pdl(prefill_bf16_kernel<HDP>, grid, kPreThreads, smem, stream, st, q, k_pool, v_pool,
                                                                  PrefillArgs{heads, scale, window, out});
}

template <int HDP>
void launch_decode_bf16(const DeviceStep& st, const float* q, const bf16* k_pool, const bf16* v_pool,
                        HeadShape heads, const DecodeArgs& a, dim3 grid, cudaStream_t stream) {
    static size_t allowed = 0;
    const size_t smem = decode_bf16_smem_bytes(heads);
    allow_smem(decode_bf16_kernel<HDP>, smem, allowed);
    launch_pdl(decode_bf16_kernel<HDP>, grid, kDecThreads, smem, stream, st, q, k_pool, v_pool, a);
}

// MINFER_DECODE_MMA=0: decode over a bf16 pool through the scalar decode_kernel
// instead of decode_bf16_kernel (to measure one against the other).
bool decode_mma_enabled() {
    static const bool enabled = env_switch_on("MINFER_DECODE_MMA");
    return enabled;
}

template <class T>
void paged_attention(const DeviceStep& st, const float* q, const T* k_pool, const T* v_pool, HeadShape heads,
                     float scale, int32_t window, float* out, void* workspace, size_t workspace_bytes,
                     cudaStream_t stream) {
    const bool fast = fast_path_ok(q, k_pool, v_pool, heads, out);
    if (fast && use_decode(st, heads)) {
        const DecodePlan p = decode_plan(st, heads);
        const size_t need = paged_attention_workspace_bytes(st, heads);
        if (need <= workspace_bytes && (need == 0 || workspace)) {
            DecodeArgs a{heads, scale, window, p.split_len, p.num_splits, nullptr, nullptr, out};
            if (p.num_splits > 1) {
                a.part_o = static_cast<float*>(workspace);
                a.part_ml = a.part_o + size_t(st.num_tokens) * heads.n_heads * p.num_splits * heads.head_dim;
            }
            const dim3 grid(st.num_tokens, heads.n_kv_heads, p.num_splits);
            bool done = false;
            if constexpr (std::is_same_v<T, bf16>) {  // bf16 tensor cores
                if (decode_mma_enabled()) {
                    const int32_t hd16 = (heads.head_dim + 15) / 16 * 16;
                    if (hd16 <= 64)
                        launch_decode_bf16<64>(st, q, k_pool, v_pool, heads, a, grid, stream);
                    else if (hd16 <= 128)
                        launch_decode_bf16<128>(st, q, k_pool, v_pool, heads, a, grid, stream);
                    else
                        launch_decode_bf16<256>(st, q, k_pool, v_pool, heads, a, grid, stream);
                    done = true;
                }
            }
            if (!done) {
                static size_t allowed = 0;
                const size_t smem = decode_smem_bytes<T>(heads);
                allow_smem(decode_kernel<T>, smem, allowed);
                launch_pdl(decode_kernel<T>, grid, kDecThreads, smem, stream, st, q, k_pool, v_pool, a);
            }
            if (p.num_splits > 1) {
                launch_pdl(combine_kernel, st.num_tokens * heads.n_heads, kCombineThreads, 0, stream, a);
            }
            return;
        }
    }
    if (fast && st.attn_tiles && st.num_attn_tiles > 0) {
        if constexpr (std::is_same_v<T, bf16>) {  // bf16 tensor cores
            const int32_t hd16 = (heads.head_dim + 15) / 16 * 16;
            if (hd16 <= 64)
                launch_prefill_bf16<64>(st, q, k_pool, v_pool, heads, scale, window, out, stream);
            else if (hd16 <= 128)
                launch_prefill_bf16<128>(st, q, k_pool, v_pool, heads, scale, window, out, stream);
            else
                launch_prefill_bf16<256>(st, q, k_pool, v_pool, heads, scale, window, out, stream);
        } else {  // 3xTF32
            const int32_t hd8 = (heads.head_dim + 7) / 8 * 8;
            if (hd8 <= 64)
                launch_prefill<64>(st, q, k_pool, v_pool, heads, scale, window, out, stream);
            else if (hd8 <= 128)
                launch_prefill<128>(st, q, k_pool, v_pool, heads, scale, window, out, stream);
            else
                launch_prefill<256>(st, q, k_pool, v_pool, heads, scale, window, out, stream);
        }
        return;
    }
    const dim3 grid(st.num_tokens, heads.n_heads);
    launch_pdl(reference_kernel<T>, grid, kRefThreads, 0, stream, st, q, k_pool, v_pool, AttnArgs{heads, scale, window}, out);
}

}  // namespace

size_t paged_attention_workspace_bytes(const DeviceStep& st, HeadShape heads) {
    if (st.num_tokens == 0 || heads.n_kv_heads <= 0 || !use_decode(st, heads)) return 0;
    const DecodePlan p = decode_plan(st, heads);
    if (p.num_splits <= 1) return 0;
    return sizeof(float) * size_t(st.num_tokens) * heads.n_heads * p.num_splits * size_t(heads.head_dim + 2);
}

void launch_paged_attention(const DeviceStep& st, const float* q, const void* k_pool, const void* v_pool,
                            PoolType pool, HeadShape heads, float scale, int32_t window, float* out, void* workspace,
                            size_t workspace_bytes, cudaStream_t stream) {
    if (st.num_tokens == 0) return;
    if (pool == PoolType::BF16)
        paged_attention(st, q, static_cast<const bf16*>(k_pool), static_cast<const bf16*>(v_pool), heads, scale,
                        window, out, workspace, workspace_bytes, stream);
    else
        paged_attention(st, q, static_cast<const float*>(k_pool), static_cast<const float*>(v_pool), heads, scale,
                        window, out, workspace, workspace_bytes, stream);
}

}  // namespace minfer::cuda
