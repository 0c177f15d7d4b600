// Warp and block reductions shared by the kernels.
#pragma once

namespace minfer::cuda {

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// Sum over the block, returned to every thread. blockDim.x must be a multiple
// of 32; `scratch` holds 32 floats of shared memory, and the call may be
// repeated with the same scratch (the leading barrier protects it).
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < warps ? scratch[lane] : 0.0f;
    return warp_sum(v);
}

}  // namespace minfer::cuda
