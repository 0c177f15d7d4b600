// FP8 E4M3 weights (--quantization fp8, vLLM's per-tensor scheme):
//  - at load, a dense weight is converted on the device: an absmax reduction
//    writes the tensor's scale (absmax / 448) into device memory, then every
//    element becomes e4m3(w / scale), rounded to nearest even and saturated;
//  - decode (rows <= kFp8GemvMaxRows): a GEMV that streams the 1-byte weights
//    once for all rows, in fp32 with the activations as they are;
//  - prefill: the activations get the same treatment (absmax and scale on the
//    device, so nothing is read back and a CUDA graph can hold it), and
//    cuBLASLt runs E4M3 x E4M3 (matmul_cublaslt.cu).
//
// The GEMV. A warp owns kGemvFeatures output features; each lane loads
// 16 weights of each feature as one 16-byte word (rows are k bytes, k a
// multiple of 16, so every row starts 16-byte aligned), widens them through
// the hardware e4m3x2 -> half2 conversion, and reuses each 16 activations it
// loads for all the warp's features. Accumulation is fp32; the scale is applied
// once at the end.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <stdexcept>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"

namespace minfer::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kGemvWarps = 4;
constexpr int kGemvFeatures = 2;  // per warp

unsigned grid_for(int64_t n) { return unsigned(std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, 1024))); }

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

// *amax = max(*amax, max |x|) (NaNs are skipped). *amax must start at 0 or
// above: non-negative floats order as their bit patterns do.
template <class T>
__global__ void __launch_bounds__(kThreads) absmax_kernel(const T* __restrict__ x, int64_t total, float* amax) {
    float m = 0.0f;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
        m = fmaxf(m, fabsf(to_float(x[i])));
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
    to_e4m3_kernel(const T* __restrict__ x, int64_t total, const float* __restrict__ amax, float* scale_out,
                   uint8_t* __restrict__ q) {
    const float s = scale_of(*amax);
    if (blockIdx.x == 0 && threadIdx.x == 0) *scale_out = s;
    const int64_t units = total / 4;
    for (int64_t u = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; u < units; u += int64_t(gridDim.x) * blockDim.x) {
        uint32_t word = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const __nv_fp8_storage_t b = __nv_cvt_float_to_fp8(to_float(x[4 * u + j]) / s, __NV_SATFINITE, __NV_E4M3);
            word |= uint32_t(b) << (8 * j);
        }
        reinterpret_cast<uint32_t*>(q)[u] = word;
    }
}

template <class T>
void quantize(const T* x, int64_t total, uint8_t* q, float* scale, float* amax, cudaStream_t stream) {
    if (total % 16) throw std::invalid_argument("fp8: the matrix must have a multiple of 16 columns");
    CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(float), stream));
    absmax_kernel<<<grid_for(total), kThreads, 0, stream>>>(x, total, amax);
    CUDA_CHECK_LAUNCH();
    to_e4m3_kernel<<<grid_for(total / 4), kThreads, 0, stream>>>(x, total, amax, scale, q);
    CUDA_CHECK_LAUNCH();
}

// A 16-byte streaming load that does not take L1 space (the weights are read once).
__device__ __forceinline__ uint4 load_stream(const uint4* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

// 16 e4m3 values (byte i is element i) widened to float (exactly, through half).
__device__ __forceinline__ void decode16(const uint4 v, float* f) {
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const auto pair = __nv_fp8x2_storage_t((words[i] >> (16 * h)) & 0xffffu);
            const __half2 hv = __half2(__nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3));
            const float2 ff = __half22float2(hv);
            f[4 * i + 2 * h] = ff.x;
            f[4 * i + 2 * h + 1] = ff.y;
        }
}

__device__ __forceinline__ void load16(const float* p, bool aligned, float* v) {
    if (aligned) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float4 f = __ldg(reinterpret_cast<const float4*>(p) + i);
            v[4 * i] = f.x, v[4 * i + 1] = f.y, v[4 * i + 2] = f.z, v[4 * i + 3] = f.w;
        }
    } else {
#pragma unroll
        for (int i = 0; i < 16; ++i) v[i] = __ldg(p + i);
    }
}

template <int Rows>
__global__ void __launch_bounds__(kGemvWarps * 32)
    fp8_gemv_kernel(const float* __restrict__ x, int32_t k, bool x_aligned, const uint8_t* __restrict__ w,
                    const float* __restrict__ scale, int32_t n, float* __restrict__ out) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int f0 = (blockIdx.x * kGemvWarps + warp) * kGemvFeatures;
    if (f0 >= n) return;  // the whole warp
    const int words = k / 16;
    const uint4* rows[kGemvFeatures];
#pragma unroll
    for (int f = 0; f < kGemvFeatures; ++f)
        rows[f] = reinterpret_cast<const uint4*>(w + size_t(min(f0 + f, n - 1)) * size_t(k));

    float acc[Rows][kGemvFeatures];
#pragma unroll
    for (int r = 0; r < Rows; ++r)
#pragma unroll
        for (int f = 0; f < kGemvFeatures; ++f) acc[r][f] = 0.0f;

#pragma unroll 2
    for (int c = lane; c < words; c += 32) {
        uint4 wv[kGemvFeatures];
#pragma unroll
        for (int f = 0; f < kGemvFeatures; ++f) wv[f] = load_stream(rows[f] + c);
        float wf[kGemvFeatures][16];
#pragma unroll
        for (int f = 0; f < kGemvFeatures; ++f) decode16(wv[f], wf[f]);
#pragma unroll
        for (int r = 0; r < Rows; ++r) {
            float xv[16];
            load16(x + size_t(r) * k + size_t(c) * 16, x_aligned, xv);
#pragma unroll
            for (int f = 0; f < kGemvFeatures; ++f)
#pragma unroll
                for (int j = 0; j < 16; ++j) acc[r][f] = fmaf(wf[f][j], xv[j], acc[r][f]);
        }
    }

    const float s = *scale;
#pragma unroll
    for (int r = 0; r < Rows; ++r)
#pragma unroll
        for (int f = 0; f < kGemvFeatures; ++f) {
            float v = acc[r][f];
#pragma unroll
            for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
            if (lane == 0 && f0 + f < n) out[size_t(r) * n + f0 + f] = v * s;
        }
}

template <int Rows>
void gemv(const float* x, int32_t k, const uint8_t* w8, const float* scale, int32_t n, float* out,
          cudaStream_t stream) {
    const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0;  // k % 16 == 0 keeps every row aligned too
    const unsigned per_cta = kGemvWarps * kGemvFeatures;
    fp8_gemv_kernel<Rows><<<(unsigned(n) + per_cta - 1) / per_cta, kGemvWarps * 32, 0, stream>>>(x, k, aligned, w8,
                                                                                                 scale, n, out);
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

void launch_fp8_gemv(const float* x, int32_t rows, int32_t k, const uint8_t* w8, const float* scale, int32_t n,
                     float* out, cudaStream_t stream) {
    if (rows == 0 || n == 0) return;
    if (k % 16) throw std::invalid_argument("fp8 gemv: k must be a multiple of 16");
    // One instantiation per row count, so the accumulators stay in registers.
    switch (rows) {
        case 1: gemv<1>(x, k, w8, scale, n, out, stream); break;
        case 2: gemv<2>(x, k, w8, scale, n, out, stream); break;
        case 3: gemv<3>(x, k, w8, scale, n, out, stream); break;
        case 4: gemv<4>(x, k, w8, scale, n, out, stream); break;
        case 5: gemv<5>(x, k, w8, scale, n, out, stream); break;
        case 6: gemv<6>(x, k, w8, scale, n, out, stream); break;
        case 7: gemv<7>(x, k, w8, scale, n, out, stream); break;
        case 8: gemv<8>(x, k, w8, scale, n, out, stream); break;
        default: throw std::invalid_argument("fp8 gemv: rows must be in 1..kFp8GemvMaxRows");
    }
}

}  // namespace minfer::cuda
