// Q8_0 weights on the GPU, kept quantized: blocks of 32 int8 with one fp16
// scale (34 bytes), K/32 blocks per row, as GGUF stores them.
//  - few rows (decode): a GEMV that reads each weight block once for all rows,
//    one warp per output feature, each lane a block at a time;
//  - many rows (prefill): the weight widened to bf16 into a scratch matrix,
//    then the cuBLASLt bf16 GEMM (the tensor cores do the work).
// First, correct versions: D3 makes them fast (wide aligned loads, int8 dot).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/reduce.cuh"

namespace minfer::cuda {

namespace {

constexpr int kBlockBytes = 34;
constexpr int kWarpsPerCta = 4;

__device__ __forceinline__ float block_scale(const uint8_t* block) {
    return __half2float(*reinterpret_cast<const __half*>(block));  // 34-byte blocks keep 2-byte alignment
}

template <int Rows>
__global__ void q8_0_gemv_kernel(const float* __restrict__ x, int32_t k, const uint8_t* __restrict__ w, int32_t n,
                                 float* __restrict__ out) {
    const int feature = blockIdx.x * kWarpsPerCta + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (feature >= n) return;
    const int blocks = k / 32;
    const uint8_t* row = w + size_t(feature) * blocks * kBlockBytes;
    float acc[Rows] = {};
    for (int b = lane; b < blocks; b += 32) {
        const uint8_t* block = row + size_t(b) * kBlockBytes;
        const float d = block_scale(block);
        const int8_t* q = reinterpret_cast<const int8_t*>(block + 2);
        float part[Rows] = {};
        for (int i = 0; i < 32; ++i) {
            const float wq = float(q[i]);
#pragma unroll
            for (int r = 0; r < Rows; ++r) part[r] += wq * x[size_t(r) * k + b * 32 + i];
        }
#pragma unroll
        for (int r = 0; r < Rows; ++r) acc[r] += d * part[r];
    }
#pragma unroll
    for (int r = 0; r < Rows; ++r) {
        const float s = warp_sum(acc[r]);
        if (lane == 0) out[size_t(r) * n + feature] = s;
    }
}

__global__ void q8_0_to_bf16_kernel(const uint8_t* __restrict__ w, int32_t n, int32_t k, int64_t ldw,
                                    __nv_bfloat16* __restrict__ out) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;  // one element of the padded matrix
    const int64_t row = i / ldw, col = i % ldw;
    if (row >= n) return;
    float v = 0.0f;
    if (col < k) {
        const uint8_t* block = w + (size_t(row) * (k / 32) + col / 32) * kBlockBytes;
        v = block_scale(block) * float(reinterpret_cast<const int8_t*>(block + 2)[col % 32]);
    }
    out[i] = __float2bfloat16(v);
}

__global__ void q8_0_embedding_kernel(DeviceStep st, const uint8_t* __restrict__ w, int32_t k,
                                      float* __restrict__ out) {
    const int row = blockIdx.x;
    const uint8_t* src = w + size_t(st.token_ids[row]) * (k / 32) * kBlockBytes;
    for (int col = threadIdx.x; col < k; col += blockDim.x) {
        const uint8_t* block = src + size_t(col / 32) * kBlockBytes;
        out[size_t(row) * k + col] = block_scale(block) * float(reinterpret_cast<const int8_t*>(block + 2)[col % 32]);
    }
}

template <int Rows>
void gemv(const float* x, int32_t k, const void* w, int32_t n, float* out, cudaStream_t stream) {
    const int ctas = (n + kWarpsPerCta - 1) / kWarpsPerCta;
    q8_0_gemv_kernel<Rows><<<ctas, kWarpsPerCta * 32, 0, stream>>>(x, k, static_cast<const uint8_t*>(w), n, out);
}

}  // namespace

void launch_q8_0_gemv(const float* x, int32_t rows, int32_t k, const void* w, int32_t n, float* out,
                      cudaStream_t stream) {
    // One instantiation per row count up to kQuantGemvMaxRows, so the accumulators stay in registers.
    switch (rows) {
        case 1: gemv<1>(x, k, w, n, out, stream); break;
        case 2: gemv<2>(x, k, w, n, out, stream); break;
        case 3: gemv<3>(x, k, w, n, out, stream); break;
        case 4: gemv<4>(x, k, w, n, out, stream); break;
        case 5: gemv<5>(x, k, w, n, out, stream); break;
        case 6: gemv<6>(x, k, w, n, out, stream); break;
        case 7: gemv<7>(x, k, w, n, out, stream); break;
        case 8: gemv<8>(x, k, w, n, out, stream); break;
        default: throw std::invalid_argument("launch_q8_0_gemv: rows must be 1..8");
    }
    CUDA_CHECK_LAUNCH();
}

void launch_q8_0_embedding(const DeviceStep& st, const void* w, int32_t k, float* out, cudaStream_t stream) {
    if (st.num_tokens == 0) return;
    q8_0_embedding_kernel<<<st.num_tokens, 256, 0, stream>>>(st, static_cast<const uint8_t*>(w), k, out);
    CUDA_CHECK_LAUNCH();
}

void launch_q8_0_to_bf16(const void* w, int32_t n, int32_t k, int64_t ldw, void* out, cudaStream_t stream) {
    const int64_t total = int64_t(n) * ldw;
    const int threads = 256;
    q8_0_to_bf16_kernel<<<unsigned((total + threads - 1) / threads), threads, 0, stream>>>(
        static_cast<const uint8_t*>(w), n, k, ldw, static_cast<__nv_bfloat16*>(out));
    CUDA_CHECK_LAUNCH();
}

}  // namespace minfer::cuda
