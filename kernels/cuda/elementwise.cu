// Row gathers and elementwise ops: embedding, SwiGLU/GeGLU, scale, logits-row gather.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/int8_act.cuh"
#include "kernels/cuda/mma.cuh"
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

// One block per token row; zeros for an id outside the table's rows.
__global__ void embedding_kernel(DeviceStep st, const void* table, DType type, int64_t ld, int32_t cols,
                                 TableRows rows, float* out) {
    pdl_wait();
    const int64_t row = blockIdx.x;
    const int64_t id = int64_t(st.token_ids[row]) - rows.first;
    const bool held = id >= 0 && id < rows.count;
    for (int32_t c = threadIdx.x; c < cols; c += blockDim.x)
        out[row * cols + c] = held ? load_as_float(table, type, id * ld + c) : 0.0f;
}

struct Silu {  // silu(g) * u
    __device__ float operator()(float g, float u) const { return g / (1.0f + expf(-g)) * u; }
};
struct GeluTanh {  // gelu(g) * u, tanh approximation
    __device__ float operator()(float g, float u) const {
        constexpr float kSqrt2OverPi = 0.7978845608028654f;
        return 0.5f * g * (1.0f + tanhf(kSqrt2OverPi * (g + 0.044715f * g * g * g))) * u;
    }
};

// out[i] = op(gate[i], up[i]). With vec, the first n/4*4 elements go four at a
// time (16-byte loads and stores: a 512-row prefill's FFN moves 88 MB here),
// the rest one at a time. out may be gate or up. With out16 the results are
// also written as bf16 (the down GEMM's input); with out8.q as int8 (the down
// GEMV's), only when vec and n % 128 == 0: every warp's lanes are in the
// four-at-a-time loop together.
template <class Op>
__global__ void gated_kernel(const float* gate, const float* up, int64_t n, bool vec, float* out,
                             __nv_bfloat16* out16, Int8Act out8) {
    pdl_wait();
    const Op op;
    const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x, stride = int64_t(gridDim.x) * blockDim.x;
    const int64_t n4 = vec ? n / 4 : 0;
    for (int64_t i = first; i < n4; i += stride) {
        const float4 g = reinterpret_cast<const float4*>(gate)[i], u = reinterpret_cast<const float4*>(up)[i];
        const float4 y = make_float4(op(g.x, u.x), op(g.y, u.y), op(g.z, u.z), op(g.w, u.w));
        reinterpret_cast<float4*>(out)[i] = y;
        if (out16) {  // out16 may be only 4-byte aligned: two pair stores
            reinterpret_cast<uint32_t*>(out16)[2 * i] = pack_bf16(y.x, y.y);
            reinterpret_cast<uint32_t*>(out16)[2 * i + 1] = pack_bf16(y.z, y.w);
        }
        if (out8.q) store_int8_quad(y, i, out8);
    }
    for (int64_t i = 4 * n4 + first; i < n; i += stride) {
        const float y = op(gate[i], up[i]);
        out[i] = y;
        if (out16) out16[i] = __float2bfloat16_rn(y);
    }
}

template <class Op>
bool launch_gated(const float* gate, const float* up, int64_t n, float* out, void* out_bf16, void* out_int8,
                  cudaStream_t stream) {
    if (n == 0) return false;
    const bool vec = is_aligned(gate, 16) && is_aligned(up, 16) && is_aligned(out, 16) && is_aligned(out_bf16, 4);
    const int64_t threads = vec ? n / 4 + n % 4 : n;
    const int64_t blocks = std::min<int64_t>((threads + kThreads - 1) / kThreads, 65536);
    // The int8 layout of n activations as one row is that of rows x (n / rows).
    const bool int8 = out_int8 && vec && n % 128 == 0;
    const Int8Act out8 = int8 ? int8_act_parts(out_int8, 1, int32_t(n)) : Int8Act{nullptr, nullptr};
    launch_pdl(gated_kernel<Op>, unsigned(blocks), kThreads, 0, stream, gate, up, n, vec, out,
               static_cast<__nv_bfloat16*>(out_bf16), out8);
    return int8;
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

void launch_embedding(const DeviceStep& st, const void* table, DType type, int64_t ld, int32_t cols, TableRows rows,
                      float* out, cudaStream_t stream) {
    if (st.num_tokens == 0) return;
    launch_pdl(embedding_kernel, st.num_tokens, kThreads, 0, stream, st, table, type, ld, cols, rows, out);
}

bool launch_swiglu(const float* gate, const float* up, int64_t n, float* out, void* out_bf16, void* out_int8,
                   cudaStream_t stream) {
    return launch_gated<Silu>(gate, up, n, out, out_bf16, out_int8, stream);
}

bool launch_geglu(const float* gate, const float* up, int64_t n, float* out, void* out_bf16, void* out_int8,
                  cudaStream_t stream) {
    return launch_gated<GeluTanh>(gate, up, n, out, out_bf16, out_int8, stream);
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
