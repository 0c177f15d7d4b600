// Greedy sampling on the device: the argmax of each logits row, ties broken
// toward the lowest id as std::max_element does (the CPU sampler's rule).
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"

namespace minfer::cuda {

namespace {

constexpr int kThreads = 1024;

// (value, id) pairs: larger value wins, then lower id. NaN never wins.
__device__ __forceinline__ bool better(float v, int32_t i, float best, int32_t best_i) {
    return v > best || (v == best && i < best_i);
}

// One block per row.
__global__ void argmax_rows_kernel(const float* logits, int32_t vocab, int32_t* out_ids) {
    __shared__ float vals[32];
    __shared__ int32_t ids[32];
    const float* x = logits + int64_t(blockIdx.x) * vocab;
    float best = -INFINITY;
    int32_t best_i = vocab;  // a sentinel that loses every tie
    for (int32_t i = threadIdx.x; i < vocab; i += blockDim.x)
        if (better(x[i], i, best, best_i)) best = x[i], best_i = i;

    for (int offset = 16; offset > 0; offset /= 2) {
        const float v = __shfl_xor_sync(0xffffffffu, best, offset);
        const int32_t i = __shfl_xor_sync(0xffffffffu, best_i, offset);
        if (better(v, i, best, best_i)) best = v, best_i = i;
    }
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) vals[warp] = best, ids[warp] = best_i;
    __syncthreads();
    if (warp == 0) {
        best = lane < int(blockDim.x / 32) ? vals[lane] : -INFINITY;
        best_i = lane < int(blockDim.x / 32) ? ids[lane] : vocab;
        for (int offset = 16; offset > 0; offset /= 2) {
            const float v = __shfl_xor_sync(0xffffffffu, best, offset);
            const int32_t i = __shfl_xor_sync(0xffffffffu, best_i, offset);
            if (better(v, i, best, best_i)) best = v, best_i = i;
        }
        if (lane == 0) out_ids[blockIdx.x] = best_i < vocab ? best_i : 0;  // all NaN: id 0
    }
}

}  // namespace

void launch_argmax_rows(const float* logits, int32_t rows, int32_t vocab, int32_t* out_ids, cudaStream_t stream) {
    if (rows == 0) return;
    argmax_rows_kernel<<<rows, kThreads, 0, stream>>>(logits, vocab, out_ids);
    CUDA_CHECK_LAUNCH();
}

}  // namespace minfer::cuda
