// RMSNorm with the fused residual add, and RoPE with the K/V write into the
// paged pool.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/reduce.cuh"

namespace minfer::cuda {

namespace {

constexpr int kNormThreads = 256;
constexpr int kRopeThreads = 128;

// One block per row: residual += delta, then out = weight * (x / rms(x)).
__global__ void add_rms_norm_kernel(float* residual, const float* delta, const float* weight, float eps, int32_t dim,
                                    float* out) {
    __shared__ float scratch[32];
    const int64_t base = int64_t(blockIdx.x) * dim;
    float* x = residual + base;
    float ss = 0.0f;
    for (int32_t j = threadIdx.x; j < dim; j += blockDim.x) {
        float v = x[j];
        if (delta) {
            v += delta[base + j];
            x[j] = v;
        }
        ss += v * v;
    }
    ss = block_sum(ss, scratch);
    const float inv = 1.0f / sqrtf(ss / dim + eps);
    // Each thread reads back only the elements it wrote above.
    for (int32_t j = threadIdx.x; j < dim; j += blockDim.x) out[base + j] = weight[j] * (inv * x[j]);
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

// One block per token row. q is rotated in place, pair by pair; k is read from
// its input rows and written rotated into the pool, element by element, so no
// thread reads what another writes.
__global__ void rope_kv_write_kernel(DeviceStep st, float* q, const float* k, const float* v, HeadShape hs,
                                     const __grid_constant__ RopeArgs rope, float* k_pool, float* v_pool) {
    const int32_t row = blockIdx.x, hd = hs.head_dim, half = rope.n_rot / 2;
    const float pos = float(st.positions[row]) * rope.position_scale;

    float* q_row = q + int64_t(row) * hs.n_heads * hd;
    for (int32_t idx = threadIdx.x; idx < hs.n_heads * half; idx += blockDim.x) {
        const int32_t h = idx / half, i = idx % half;
        const int2 p = rope_pair(rope, i);
        float* x = q_row + h * hd;
        float s, c;
        rope_sincos(rope, i, pos, &s, &c);
        const float a = x[p.x], b = x[p.y];
        x[p.x] = a * c - b * s;
        x[p.y] = a * s + b * c;
    }

    // A padding row of a recorded step has no slot: nothing to write.
    if (st.slot_mapping[row] < 0) return;
    const int32_t kv_row = hs.n_kv_heads * hd;
    const float* k_src = k + int64_t(row) * kv_row;
    const float* v_src = v + int64_t(row) * kv_row;
    float* k_dst = k_pool + int64_t(st.slot_mapping[row]) * kv_row;
    float* v_dst = v_pool + int64_t(st.slot_mapping[row]) * kv_row;
    for (int32_t idx = threadIdx.x; idx < kv_row; idx += blockDim.x) {
        v_dst[idx] = v_src[idx];
        const int32_t d = idx % hd;
        if (d >= rope.n_rot) {
            k_dst[idx] = k_src[idx];
            continue;
        }
        const bool first = rope.neox ? d < half : d % 2 == 0;
        const int32_t i = rope.neox ? (first ? d : d - half) : d / 2;
        const int2 p = rope_pair(rope, i);
        const float* x = k_src + (idx - d);
        float s, c;
        rope_sincos(rope, i, pos, &s, &c);
        const float a = x[p.x], b = x[p.y];
        k_dst[idx] = first ? a * c - b * s : a * s + b * c;
    }
}

}  // namespace

void launch_add_rms_norm(float* residual, const float* delta, const float* weight, float eps, int32_t rows,
                         int32_t dim, float* out, cudaStream_t stream) {
    if (rows == 0) return;
    add_rms_norm_kernel<<<rows, kNormThreads, 0, stream>>>(residual, delta, weight, eps, dim, out);
    CUDA_CHECK_LAUNCH();
}

void launch_rope_kv_write(const DeviceStep& st, float* q, const float* k, const float* v, HeadShape heads,
                          const RopeArgs& rope, float* k_pool, float* v_pool, cudaStream_t stream) {
    if (st.num_tokens == 0) return;
    rope_kv_write_kernel<<<st.num_tokens, kRopeThreads, 0, stream>>>(st, q, k, v, heads, rope, k_pool, v_pool);
    CUDA_CHECK_LAUNCH();
}

}  // namespace minfer::cuda
