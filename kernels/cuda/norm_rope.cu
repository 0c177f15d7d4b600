// RMSNorm with the fused residual add, and RoPE with the K/V write into the
// paged pool (float32 or bf16 elements).
#include <cuda_bf16.h>

#include <algorithm>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/int8_act.cuh"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/reduce.cuh"

namespace minfer::cuda {

namespace {

constexpr int kNormMaxThreads = 1024;
constexpr int kRopeThreads = 64;

// One block per row: residual += delta, then out = weight * (x / rms(x)). A
// decode step has one or a few rows, so a block is as wide as its row (up to
// 1024 threads, four floats a thread) and reads it in one pass of 16-byte loads.
// With out16, the output is also written as bf16 (for the GEMM that reads it next);
// with out8.q, as int8 (for the int8 GEMV): Vec and dim % 128 == 0, so that every
// warp's lanes are all in the loop together.
template <bool Vec>
__global__ void __launch_bounds__(kNormMaxThreads)
    add_rms_norm_kernel(float* residual, const float* delta, const float* weight, float eps, int32_t dim, float* out,
                        __nv_bfloat16* out16, Int8Act out8) {
    pdl_wait();
    __shared__ float scratch[32];
    const int64_t base = int64_t(blockIdx.x) * dim;
    float* x = residual + base;
    float ss = 0.0f;
    if constexpr (Vec) {
        for (int32_t j = threadIdx.x; j < dim / 4; j += blockDim.x) {
            float4 v = reinterpret_cast<const float4*>(x)[j];
            if (delta) {
                const float4 d = reinterpret_cast<const float4*>(delta + base)[j];
                v.x += d.x, v.y += d.y, v.z += d.z, v.w += d.w;
                reinterpret_cast<float4*>(x)[j] = v;
            }
            ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
        }
    } else {
        for (int32_t j = threadIdx.x; j < dim; j += blockDim.x) {
            float v = x[j];
            if (delta) {
                v += delta[base + j];
                x[j] = v;
            }
            ss += v * v;
        }
    }
    ss = block_sum(ss, scratch);
    const float inv = 1.0f / sqrtf(ss / dim + eps);
    // Each thread reads back only the elements it wrote above.
    if constexpr (Vec) {
        for (int32_t j = threadIdx.x; j < dim / 4; j += blockDim.x) {
            const float4 v = reinterpret_cast<const float4*>(x)[j], w = reinterpret_cast<const float4*>(weight)[j];
            const float4 y = make_float4(w.x * (inv * v.x), w.y * (inv * v.y), w.z * (inv * v.z), w.w * (inv * v.w));
            reinterpret_cast<float4*>(out + base)[j] = y;
            if (out16) {  // out16 may be only 4-byte aligned: two pair stores
                uint32_t* o16 = reinterpret_cast<uint32_t*>(out16 + base + 4 * j);
                o16[0] = pack_bf16(y.x, y.y);
                o16[1] = pack_bf16(y.z, y.w);
            }
            if (out8.q) store_int8_quad(y, base / 4 + j, out8);
        }
    } else {
        for (int32_t j = threadIdx.x; j < dim; j += blockDim.x) {
            const float y = weight[j] * (inv * x[j]);
            out[base + j] = y;
            if (out16) out16[base + j] = __float2bfloat16_rn(y);
        }
    }
}

// The rotation angle of pair i at (scaled) position pos. The divisions and the
// product round exactly as on the CPU; only sincosf differs (by an ulp or so).
__device__ __forceinline__ void rope_sincos(const RopeArgs& rope, int i, float pos, float* s, float* c) {
    float freq = rope.inv_freq[i];
    if (rope.freq_factors) freq /= rope.freq_factors[i];
    sincosf(pos * freq, s, c);
}

// Pair i of a head: NORM rotates (2i, 2i+1), NEOX (i, i + n_rot/2).
__device__ __forceinline__ int2 rope_pair(const RopeArgs& rope, int i) {
    return rope.neox ? make_int2(i, i + rope.n_rot / 2) : make_int2(2 * i, 2 * i + 1);
}

__device__ __forceinline__ void store(float* p, float x) { *p = x; }
__device__ __forceinline__ void store(__nv_bfloat16* p, float x) { *p = __float2bfloat16_rn(x); }

// One block per (token row, head), the q heads first, then the kv heads: a
// decode step's single row still spreads over as many blocks as it has heads.
// A q head is rotated in place, pair by pair; a kv head's k is read from its
// input row and written rotated into the pool, element by element (so no thread
// reads what another writes), and its v is copied.
template <class T>
__global__ void __launch_bounds__(kRopeThreads)
    rope_kv_write_kernel(DeviceStep st, float* q, const float* k, const float* v, HeadShape hs,
                         const __grid_constant__ RopeArgs rope, T* k_pool, T* v_pool) {
    pdl_wait();
    const int32_t row = blockIdx.x, head = blockIdx.y, hd = hs.head_dim, half = rope.n_rot / 2;
    const float pos = float(st.positions[row]) * rope.position_scale;

    if (head < hs.n_heads) {
        float* x = q + (int64_t(row) * hs.n_heads + head) * hd;
        for (int32_t i = threadIdx.x; i < half; i += blockDim.x) {
            const int2 p = rope_pair(rope, i);
            float s, c;
            rope_sincos(rope, i, pos, &s, &c);
            const float a = x[p.x], b = x[p.y];
            x[p.x] = a * c - b * s;
            x[p.y] = a * s + b * c;
        }
        return;
    }

    // A padding row of a recorded step has no slot: nothing to write.
    if (st.slot_mapping[row] < 0) return;
    const int32_t kv_head = head - hs.n_heads;
    const int64_t src = (int64_t(row) * hs.n_kv_heads + kv_head) * hd;
    const int64_t dst = (int64_t(st.slot_mapping[row]) * hs.n_kv_heads + kv_head) * hd;
    const float* x = k + src;
    for (int32_t d = threadIdx.x; d < hd; d += blockDim.x) {
        store(v_pool + dst + d, v[src + d]);
        if (d >= rope.n_rot) {
            store(k_pool + dst + d, x[d]);
            continue;
        }
        const bool first = rope.neox ? d < half : d % 2 == 0;
        const int32_t i = rope.neox ? (first ? d : d - half) : d / 2;
        const int2 p = rope_pair(rope, i);
        float s, c;
        rope_sincos(rope, i, pos, &s, &c);
        const float a = x[p.x], b = x[p.y];
        store(k_pool + dst + d, first ? a * c - b * s : a * s + b * c);
    }
}

}  // namespace

bool launch_add_rms_norm(float* residual, const float* delta, const float* weight, float eps, int32_t rows,
                         int32_t dim, float* out, void* out_bf16, void* out_int8, cudaStream_t stream) {
    if (rows == 0) return false;
    const bool vec = dim % 4 == 0 && is_aligned(residual, 16) && is_aligned(weight, 16) && is_aligned(out, 16) &&
                     is_aligned(delta, 16) && is_aligned(out_bf16, 4);
    const int32_t per_thread = vec ? 4 : 1;
    const int threads = std::clamp((dim / per_thread + 31) / 32 * 32, 32, kNormMaxThreads);
    auto* out16 = static_cast<__nv_bfloat16*>(out_bf16);
    const bool int8 = out_int8 && vec && dim % 128 == 0;
    const Int8Act out8 = int8 ? int8_act_parts(out_int8, rows, dim) : Int8Act{nullptr, nullptr};
    if (vec)
        launch_pdl(add_rms_norm_kernel<true>, rows, threads, 0, stream, residual, delta, weight, eps, dim, out, out16,
                   out8);
    else
        launch_pdl(add_rms_norm_kernel<false>, rows, threads, 0, stream, residual, delta, weight, eps, dim, out, out16,
                   out8);
    return int8;
}

void launch_rope_kv_write(const DeviceStep& st, float* q, const float* k, const float* v, HeadShape heads,
                          const RopeArgs& rope, void* k_pool, void* v_pool, PoolType pool, cudaStream_t stream) {
    if (st.num_tokens == 0) return;
    const dim3 grid(unsigned(st.num_tokens), unsigned(heads.n_heads + heads.n_kv_heads));
    if (pool == PoolType::BF16)
        launch_pdl(rope_kv_write_kernel<__nv_bfloat16>, grid, kRopeThreads, 0, stream, st, q, k, v, heads, rope,
                   static_cast<__nv_bfloat16*>(k_pool), static_cast<__nv_bfloat16*>(v_pool));
    else
        launch_pdl(rope_kv_write_kernel<float>, grid, kRopeThreads, 0, stream, st, q, k, v, heads, rope,
                   static_cast<float*>(k_pool), static_cast<float*>(v_pool));
}

}  // namespace minfer::cuda
