// FP8 E4M3 weights (--quantization fp8, vLLM's per-tensor scheme):
//  - at load, a dense weight is converted on the device: an absmax reduction
//    writes the tensor's scale (absmax / 448) into device memory, then every
//    element becomes e4m3(w / scale), rounded to nearest even and saturated;
//  - decode (rows <= kGemvMaxRows): gemv.cu's GEMV streams the 1-byte weights
//    once for all rows, in fp32 with the activations as they are;
//  - prefill: the activations get the same treatment (absmax and scale on the
//    device, so nothing is read back and a CUDA graph can hold it), and
//    cuBLASLt runs E4M3 x E4M3 (matmul_cublaslt.cu).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <type_traits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"

namespace minfer::cuda {

namespace {

constexpr int kThreads = 256;

unsigned grid_for(int64_t n) { return unsigned(std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, 1024))); }

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

// Elements 4u .. 4u+3 as floats: one 16-byte load when x is float32 and
// 16-byte aligned (activations; prefill quantizes 8 to 29 MB of them a matmul).
template <class T>
__device__ __forceinline__ float4 load4(const T* __restrict__ x, int64_t u, bool aligned) {
    if constexpr (std::is_same_v<T, float>)
        if (aligned) return reinterpret_cast<const float4*>(x)[u];
    return make_float4(to_float(x[4 * u]), to_float(x[4 * u + 1]), to_float(x[4 * u + 2]), to_float(x[4 * u + 3]));
}

// *amax = max(*amax, max |x|) (NaNs are skipped; total is a multiple of 4).
// *amax must start at 0 or above: non-negative floats order as their bit patterns do.
template <class T>
__global__ void __launch_bounds__(kThreads)
    absmax_kernel(const T* __restrict__ x, int64_t total, bool aligned, float* amax) {
    float m = 0.0f;
    for (int64_t u = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; u < total / 4; u += int64_t(gridDim.x) * blockDim.x) {
        const float4 v = load4(x, u, aligned);
        m = fmaxf(m, fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    __shared__ float part[kThreads / 32];
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int i = 1; i < kThreads / 32; ++i) m = fmaxf(m, part[i]);
        atomicMax(reinterpret_cast<int*>(amax), __float_as_int(m));
    }
}

// The scale for an absmax: absmax / 448, or 1 for an all-zero tensor (or one
// so small that the division underflows).
__device__ __forceinline__ float scale_of(float amax) {
    const float s = amax / kFp8Max;
    return s > 0.0f ? s : 1.0f;
}

// q[i] = e4m3(x[i] / scale), four elements a thread (total is a multiple of 16).
template <class T>
__global__ void __launch_bounds__(kThreads)
    to_e4m3_kernel(const T* __restrict__ x, int64_t total, bool aligned, const float* __restrict__ amax,
                   float* scale_out, uint8_t* __restrict__ q) {
    const float s = scale_of(*amax);
    if (blockIdx.x == 0 && threadIdx.x == 0) *scale_out = s;
    const int64_t units = total / 4;
    for (int64_t u = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; u < units; u += int64_t(gridDim.x) * blockDim.x) {
        const float4 v = load4(x, u, aligned);
        const float e[4] = {v.x, v.y, v.z, v.w};
        uint32_t word = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const __nv_fp8_storage_t b = __nv_cvt_float_to_fp8(e[j] / s, __NV_SATFINITE, __NV_E4M3);
            word |= uint32_t(b) << (8 * j);
        }
        reinterpret_cast<uint32_t*>(q)[u] = word;
    }
}

template <class T>
void quantize(const T* x, int64_t total, uint8_t* q, float* scale, float* amax, cudaStream_t stream) {
    if (total % 16) throw std::invalid_argument("fp8: the matrix must have a multiple of 16 columns");
    const bool aligned = is_aligned(x, 16);
    CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(float), stream));
    absmax_kernel<<<grid_for(total / 4), kThreads, 0, stream>>>(x, total, aligned, amax);
    CUDA_CHECK_LAUNCH();
    to_e4m3_kernel<<<grid_for(total / 4), kThreads, 0, stream>>>(x, total, aligned, amax, scale, q);
    CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_fp8_quantize_weight(const void* w, DType type, int64_t n, int64_t k, uint8_t* w8, float* scale,
                                float* amax, cudaStream_t stream) {
    const int64_t total = n * k;
    if (total == 0) return;
    switch (type) {
        case DType::F32: quantize(static_cast<const float*>(w), total, w8, scale, amax, stream); break;
        case DType::F16: quantize(static_cast<const __half*>(w), total, w8, scale, amax, stream); break;
        case DType::BF16: quantize(static_cast<const __nv_bfloat16*>(w), total, w8, scale, amax, stream); break;
    }
}

void launch_fp8_quantize_act(const float* x, int64_t rows, int64_t k, uint8_t* xq, float* scale, float* amax,
                             cudaStream_t stream) {
    if (rows * k == 0) return;
    quantize(x, rows * k, xq, scale, amax, stream);
}

}  // namespace minfer::cuda
