// Paged attention, first version: correct for every step shape, not fast.
//
// One thread block per (row, head). The block walks its sequence's keys from
// the window start to the row's own position through the block table, a tile
// of keys at a time, with an online softmax (running max m and sum l; the
// output accumulator is rescaled whenever the max grows). Decode, prefill and
// verification rows are all the same: a row attends to positions <= its own.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/reduce.cuh"

namespace minfer::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kTile = 64;  // keys per pass; <= kThreads so that one thread exponentiates each score
constexpr int kDimsPerThread = kMaxHeadDim / kThreads;

struct AttnArgs {
    HeadShape heads;
    float scale;
    int32_t window;
};

__global__ __launch_bounds__(kThreads) void paged_attention_kernel(DeviceStep st, const float* q, const float* k_pool,
                                                                    const float* v_pool, AttnArgs a, float* out) {
    __shared__ float q_s[kMaxHeadDim];
    __shared__ float p_s[kTile];  // scores, then their exponentials
    const int32_t row = blockIdx.x, h = blockIdx.y, hd = a.heads.head_dim, bs = st.block_size;
    const int32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int64_t kv_row = int64_t(a.heads.n_kv_heads) * hd;
    const int64_t kv_off = int64_t(h / (a.heads.n_heads / a.heads.n_kv_heads)) * hd;
    const int32_t pos = st.positions[row];
    const int32_t first = a.window > 0 ? max(0, pos - a.window + 1) : 0;
    const int32_t* table = st.block_tables + int64_t(st.row_seq[row]) * st.max_blocks_per_seq;
    auto slot = [&](int32_t t) { return int64_t(table[t / bs]) * bs + t % bs; };

    const float* q_row = q + (int64_t(row) * a.heads.n_heads + h) * hd;
    for (int32_t d = threadIdx.x; d < hd; d += kThreads) q_s[d] = q_row[d];
    __syncthreads();

    float acc[kDimsPerThread] = {};  // output dims threadIdx.x + j * kThreads
    float m = -INFINITY, l = 0.0f;   // the same in every thread
    for (int32_t t0 = first; t0 <= pos; t0 += kTile) {
        const int32_t count = min(kTile, pos + 1 - t0);
        // Scores: a warp per key, its lanes splitting the head dimension.
        for (int32_t i = warp; i < count; i += kWarps) {
            const float* k = k_pool + slot(t0 + i) * kv_row + kv_off;
            float dot = 0.0f;
            for (int32_t d = lane; d < hd; d += 32) dot += q_s[d] * k[d];
            dot = warp_sum(dot);
            if (lane == 0) p_s[i] = dot * a.scale;
        }
        __syncthreads();
        float m_new = m;
        for (int32_t i = 0; i < count; ++i) m_new = fmaxf(m_new, p_s[i]);
        const float alpha = expf(m - m_new);  // 0 on the first tile, where m = -inf
        __syncthreads();                       // every thread has read the raw scores
        if (threadIdx.x < count) p_s[threadIdx.x] = expf(p_s[threadIdx.x] - m_new);
        __syncthreads();

        float tile_sum = 0.0f;
#pragma unroll
        for (int j = 0; j < kDimsPerThread; ++j) acc[j] *= alpha;
        for (int32_t i = 0; i < count; ++i) {
            const float p = p_s[i];
            const float* v = v_pool + slot(t0 + i) * kv_row + kv_off;
            tile_sum += p;
#pragma unroll
            for (int j = 0; j < kDimsPerThread; ++j) {
                const int32_t d = threadIdx.x + j * kThreads;
                if (d < hd) acc[j] += p * v[d];
            }
        }
        l = l * alpha + tile_sum;
        m = m_new;
        __syncthreads();  // p_s is rewritten by the next tile
    }

    float* o = out + (int64_t(row) * a.heads.n_heads + h) * hd;
#pragma unroll
    for (int j = 0; j < kDimsPerThread; ++j) {
        const int32_t d = threadIdx.x + j * kThreads;
        if (d < hd) o[d] = acc[j] / l;
    }
}

}  // namespace

void launch_paged_attention(const DeviceStep& st, const float* q, const float* k_pool, const float* v_pool,
                            HeadShape heads, float scale, int32_t window, float* out, cudaStream_t stream) {
    if (st.num_tokens == 0) return;
    const dim3 grid(st.num_tokens, heads.n_heads);
    paged_attention_kernel<<<grid, kThreads, 0, stream>>>(st, q, k_pool, v_pool, AttnArgs{heads, scale, window}, out);
    CUDA_CHECK_LAUNCH();
}

}  // namespace minfer::cuda
