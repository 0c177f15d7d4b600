// What the decode GEMVs share (gemv.cu: bf16, f16 and FP8 weights on fp32
// activations; gemv_int8.cu: Q4_K, Q6_K and Q8_0 on int8 ones): the matrices of
// one launch, which segment a CTA works on, and a warp's last step.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/reduce.cuh"

namespace minfer::cuda {

// The matrices of one launch, which share its input (q/k/v, gate/up): segment s
// has n[s] rows, owns the CTAs from first_block[s] on and writes out[s];
// scale[s] is null, or the FP8 tensor's scale (q, k and v each have their own).
struct GemvSegments {
    const uint4* w[kGemvMaxSegments];
    float* out[kGemvMaxSegments];
    const float* scale[kGemvMaxSegments];
    int32_t n[kGemvMaxSegments];
    int32_t first_block[kGemvMaxSegments];
    int32_t count;
};

// The segments of targets[0..count) at features_per_cta output features a CTA
// (scales: null, or one per target); blocks is set to the launch's CTA count.
inline GemvSegments gemv_segments(const GemvTarget* targets, int32_t count, const float* const* scales,
                                  int32_t features_per_cta, int32_t& blocks) {
    GemvSegments segs{};
    blocks = 0;
    for (int32_t i = 0; i < count; ++i) {
        segs.w[i] = static_cast<const uint4*>(targets[i].w);
        segs.out[i] = targets[i].out;
        segs.scale[i] = scales ? scales[i] : nullptr;
        segs.n[i] = targets[i].n;
        segs.first_block[i] = blocks;
        blocks += (targets[i].n + features_per_cta - 1) / features_per_cta;
    }
    segs.count = count;
    return segs;
}

// The segment this CTA belongs to.
__device__ __forceinline__ int gemv_segment(const GemvSegments& segs) {
    int seg = 0;
    while (seg + 1 < segs.count && int32_t(blockIdx.x) >= segs.first_block[seg + 1]) ++seg;
    return seg;
}

// out[r, f0 + f] = scale times the sum of acc[r][f] over the warp, for the
// features below n (lane 0 writes).
template <int Rows, int F>
__device__ __forceinline__ void store_warp_sums(const float (&acc)[Rows][F], int lane, int32_t f0, int32_t n,
                                                float scale, float* __restrict__ out) {
#pragma unroll
    for (int r = 0; r < Rows; ++r)
#pragma unroll
        for (int f = 0; f < F; ++f) {
            const float v = warp_sum(acc[r][f]);
            if (lane == 0 && f0 + f < n) out[size_t(r) * n + f0 + f] = v * scale;
        }
}

}  // namespace minfer::cuda
