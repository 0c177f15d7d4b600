// Greedy sampling on the device: the argmax of each logits row, ties broken
// toward the lowest id as std::max_element does (the CPU sampler's rule).
//
// A row of a large vocabulary (128K-262K floats) is too much for one block at
// decode's single row, so it is cut into chunks of kChunk logits: one block per
// (chunk, row) finds its chunk's best, and one warp per row then picks among
// the chunks. Both passes use the same order, so the result does not depend on
// how the row was cut.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"

namespace minfer::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kChunk = 4096;  // logits per block: 16 a thread

// (value, id) pairs: larger value wins, then lower id. NaN never wins.
__device__ __forceinline__ bool better(float v, int32_t i, float best, int32_t best_i) {
    return v > best || (v == best && i < best_i);
}

__device__ __forceinline__ void warp_best(float& best, int32_t& best_i) {
    for (int offset = 16; offset > 0; offset /= 2) {
        const float v = __shfl_xor_sync(0xffffffffu, best, offset);
        const int32_t i = __shfl_xor_sync(0xffffffffu, best_i, offset);
        if (better(v, i, best, best_i)) best = v, best_i = i;
    }
}

// Block (chunk, row): the best of logits[row, chunk * kChunk ...] into partials.
// The sentinel id `vocab` loses every tie, so an all-NaN chunk reports it.
__global__ void __launch_bounds__(kThreads)
    argmax_chunks_kernel(const float* logits, int32_t vocab, float* part_vals, int32_t* part_ids) {
    __shared__ float vals[kThreads / 32];
    __shared__ int32_t ids[kThreads / 32];
    const float* x = logits + int64_t(blockIdx.y) * vocab;
    const int32_t begin = blockIdx.x * kChunk, end = min(vocab, begin + kChunk);
    float best = -INFINITY;
    int32_t best_i = vocab;
#pragma unroll 4
    for (int32_t i = begin + threadIdx.x; i < end; i += kThreads) {
        const float v = __ldg(x + i);
        if (better(v, i, best, best_i)) best = v, best_i = i;
    }
    warp_best(best, best_i);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) vals[warp] = best, ids[warp] = best_i;
    __syncthreads();
    if (warp == 0) {
        best = lane < kThreads / 32 ? vals[lane] : -INFINITY;
        best_i = lane < kThreads / 32 ? ids[lane] : vocab;
        warp_best(best, best_i);
        if (lane == 0) {
            const int64_t p = int64_t(blockIdx.y) * gridDim.x + blockIdx.x;
            part_vals[p] = best;
            part_ids[p] = best_i;
        }
    }
}

// One warp per row over its chunks' partials.
__global__ void argmax_finish_kernel(const float* part_vals, const int32_t* part_ids, int32_t chunks, int32_t vocab,
                                     int32_t* out_ids) {
    const int64_t base = int64_t(blockIdx.x) * chunks;
    float best = -INFINITY;
    int32_t best_i = vocab;
    for (int32_t c = threadIdx.x; c < chunks; c += 32)
        if (better(part_vals[base + c], part_ids[base + c], best, best_i)) best = part_vals[base + c], best_i = part_ids[base + c];
    warp_best(best, best_i);
    if (threadIdx.x == 0) out_ids[blockIdx.x] = best_i < vocab ? best_i : 0;  // all NaN: id 0
}

int32_t chunks_of(int32_t vocab) { return (vocab + kChunk - 1) / kChunk; }

}  // namespace

size_t argmax_workspace_bytes(int32_t rows, int32_t vocab) {
    return size_t(rows) * size_t(chunks_of(vocab)) * (sizeof(float) + sizeof(int32_t));
}

void launch_argmax_rows(const float* logits, int32_t rows, int32_t vocab, void* workspace, int32_t* out_ids,
                        cudaStream_t stream) {
    if (rows == 0) return;
    const int32_t chunks = chunks_of(vocab);
    float* part_vals = static_cast<float*>(workspace);
    int32_t* part_ids = reinterpret_cast<int32_t*>(part_vals + size_t(rows) * chunks);
    argmax_chunks_kernel<<<dim3(unsigned(chunks), unsigned(rows)), kThreads, 0, stream>>>(logits, vocab, part_vals,
                                                                                          part_ids);
    CUDA_CHECK_LAUNCH();
    argmax_finish_kernel<<<unsigned(rows), 32, 0, stream>>>(part_vals, part_ids, chunks, vocab, out_ids);
    CUDA_CHECK_LAUNCH();
}

}  // namespace minfer::cuda
