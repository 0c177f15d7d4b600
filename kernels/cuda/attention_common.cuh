// What the paged-attention kernels share. attention.cu (dispatch and the
// reference kernel), attention_decode.cu and attention_prefill.cu include it:
// the pool's element type (float or bf16) and its loads widened to float, the
// 16-byte cp.async copy of a K/V tile, the sliding window's first key, the
// online softmax over an m16n8 tile of scores (the prefill kernels and
// decode_bf16_kernel), the opt-in to more than 48 KB of shared memory; and the
// launchers attention_decode.cu and attention_prefill.cu give the dispatch.
// The device helpers sit in an anonymous namespace, as the kernels do, so each
// .cu file compiles its own copy of them. The MMA wrappers are in mma.cuh.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/reduce.cuh"

namespace minfer::cuda {

namespace {

// ---- small device helpers ------------------------------------------------------

__device__ __forceinline__ float warp_max(float v) {
    for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

// Where a kv head's keys lie in the pool: the sequence's block table, and
// the last key a tile may hold (later ones are zero-filled).
struct KvTileSource {
    const int32_t* table;
    int32_t block_size;
    int64_t kv_row;  // elements per token: n_kv_heads * head_dim
    int32_t kvh, hd;
    int32_t hd_pad;  // the columns a tile row fills: head_dim rounded up (to 8 or 16), zeros past head_dim
    int32_t hi;
};

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

// Keys t0..t0+Keys-1 of K and V into rows of ld pool elements (src.hd_pad
// used), one 16-byte cp.async a piece; keys past src.hi and columns past
// head_dim are zeros.
template <int Keys, int Threads, class T>
__device__ __forceinline__ void load_kv_tile(const KvTileSource& src, const T* k_pool, const T* v_pool, int32_t t0,
                                             T* ks, T* vs, int32_t ld) {
    constexpr int E = kPerCopy<T>;
    const int32_t copies_pad = src.hd_pad / E, copies = src.hd / E;
    for (int32_t i = threadIdx.x; i < Keys * copies_pad; i += Threads) {
        const int32_t key = i / copies_pad, c = i - key * copies_pad, t = t0 + key;
        const bool ok = t <= src.hi && c < copies;
        int64_t off = 0;
        if (ok)
            off = (int64_t(src.table[t / src.block_size]) * src.block_size + t % src.block_size) * src.kv_row +
                  int64_t(src.kvh) * src.hd + c * E;
        cp_async16(ks + key * ld + c * E, k_pool + off, ok);
        cp_async16(vs + key * ld + c * E, v_pool + off, ok);
    }
}

// The two fragment rows of a thread (g8 and g8 + 8 of its warp's m16 tile):
// their positions and window starts, the keys the warp needs (w_lo..w_hi) and
// those the whole block needs (lo..hi). The prefill kernels fill it by
// prefill_rows (attention_prefill.cu); decode_bf16_kernel fills its own.
struct PrefillRows {
    int32_t pos[2], first[2];
    int32_t w_lo, w_hi, lo, hi;
};

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

// Opts in to more than 48 KB of dynamic shared memory, once per kernel.
template <class Kernel>
void allow_smem(Kernel kernel, size_t bytes, size_t& allowed) {
    if (bytes <= 48 * 1024 || bytes <= allowed) return;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
    allowed = bytes;
}

}  // namespace

// ---- the launchers attention.cu's dispatch calls ------------------------------------------

// attention_decode.cu: whether the decode kernels take this step (one query row
// a sequence, a GQA group of at most 16 heads).
bool decode_attention_usable(const DeviceStep& st, HeadShape heads);
// The split decode kernel (decode_bf16_kernel over a bf16 pool when decode_mma)
// and the combine of its splits; false, launching nothing, when the workspace
// is smaller than paged_attention_workspace_bytes. out8 as launch_paged_attention's;
// wrote8 set when the combine writes it.
bool launch_decode_attention(const DeviceStep& st, const float* q, const float* k_pool, const float* v_pool,
                             HeadShape heads, float scale, int32_t window, float* out, void* out8, bool& wrote8,
                             void* workspace, size_t workspace_bytes, bool decode_mma, cudaStream_t stream);
bool launch_decode_attention(const DeviceStep& st, const float* q, const __nv_bfloat16* k_pool,
                             const __nv_bfloat16* v_pool, HeadShape heads, float scale, int32_t window, float* out,
                             void* out8, bool& wrote8, void* workspace, size_t workspace_bytes, bool decode_mma,
                             cudaStream_t stream);
// attention_prefill.cu: the tensor-core prefill kernels over the step's
// attention tiles (3xTF32 over a float pool, bf16 over a bf16 one).
void launch_prefill_attention(const DeviceStep& st, const float* q, const float* k_pool, const float* v_pool,
                              HeadShape heads, float scale, int32_t window, float* out, cudaStream_t stream);
void launch_prefill_attention(const DeviceStep& st, const float* q, const __nv_bfloat16* k_pool,
                              const __nv_bfloat16* v_pool, HeadShape heads, float scale, int32_t window, float* out,
                              cudaStream_t stream);

}  // namespace minfer::cuda
