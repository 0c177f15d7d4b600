// Row gathers and elementwise ops: embedding, SwiGLU, logits-row gather.
#include <cuda_fp16.h>

#include <algorithm>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/pdl.cuh"

namespace minfer::cuda {

namespace {

constexpr int kThreads = 256;

__device__ float load_as_float(const void* base, DType type, int64_t i) {
    switch (type) {
        case DType::F16: return __half2float(static_cast<const __half*>(base)[i]);
        case DType::BF16: return __uint_as_float(uint32_t(static_cast<const uint16_t*>(base)[i]) << 16);
        default: return static_cast<const float*>(base)[i];
    }
}

// One block per token row.
__global__ void embedding_kernel(DeviceStep st, const void* table, DType type, int64_t ld, int32_t cols,
                                 float* out) {
    pdl_wait();
    const int64_t row = blockIdx.x;
    const int64_t src = int64_t(st.token_ids[row]) * ld;
    for (int32_t c = threadIdx.x; c < cols; c += blockDim.x) out[row * cols + c] = load_as_float(table, type, src + c);
}

__global__ void swiglu_kernel(const float* gate, const float* up, int64_t n, float* out) {
    pdl_wait();
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

__global__ void geglu_kernel(const float* gate, const float* up, int64_t n, float* out) {
    pdl_wait();
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const float g = gate[i];
        out[i] = 0.5f * g * (1.0f + tanhf(kSqrt2OverPi * (g + 0.044715f * g * g * g))) * up[i];
    }
}

__global__ void scale_kernel(float* x, int64_t n, float s) {
    pdl_wait();
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        x[i] *= s;
}

// One block per logits row.
__global__ void gather_rows_kernel(DeviceStep st, const float* x, int32_t dim, float* out) {
    pdl_wait();
    const float* src = x + int64_t(st.logits_rows[blockIdx.x]) * dim;
    float* dst = out + int64_t(blockIdx.x) * dim;
    for (int32_t c = threadIdx.x; c < dim; c += blockDim.x) dst[c] = src[c];
}

}  // namespace

void launch_embedding(const DeviceStep& st, const void* table, DType type, int64_t ld, int32_t cols, float* out,
                      cudaStream_t stream) {
    if (st.num_tokens == 0) return;
    launch_pdl(embedding_kernel, st.num_tokens, kThreads, 0, stream, st, table, type, ld, cols, out);
}

void launch_swiglu(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream) {
    if (n == 0) return;
    const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, 65536);
    launch_pdl(swiglu_kernel, unsigned(blocks), kThreads, 0, stream, gate, up, n, out);
}

void launch_geglu(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream) {
    if (n == 0) return;
    const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, 65536);
    launch_pdl(geglu_kernel, unsigned(blocks), kThreads, 0, stream, gate, up, n, out);
}

void launch_scale(float* x, int64_t n, float s, cudaStream_t stream) {
    if (n == 0) return;
    const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, 65536);
    launch_pdl(scale_kernel, unsigned(blocks), kThreads, 0, stream, x, n, s);
}

void launch_gather_rows(const DeviceStep& st, const float* x, int32_t dim, float* out, cudaStream_t stream) {
    if (st.num_logit_rows == 0) return;
    launch_pdl(gather_rows_kernel, st.num_logit_rows, kThreads, 0, stream, st, x, dim, out);
}

}  // namespace minfer::cuda
