// Paged attention: the dispatch (launch_paged_attention) and the fallback.
//
// A step goes to the split decode kernels (attention_decode.cu) when every
// sequence has one query row, to the tensor-core prefill kernels
// (attention_prefill.cu) when the step has attention tiles, and otherwise, or
// when the head dim is not a multiple of one 16-byte copy (4 floats, 8 bf16) or
// a pointer is not 16-byte aligned, to reference_kernel here: the first version
// (a block per (row, head), scalar loads).
//
// Every kernel is a template on the pool's element type, float or bf16 (or
// written for bf16 alone): a 16-byte copy moves 4 or 8 of them, shared memory
// holds them as they are, and they are widened to float where they are read
// for arithmetic. attention_common.cuh holds what the three files share.
#include "kernels/cuda/attention_common.cuh"

namespace minfer::cuda {

namespace {

struct AttnArgs {
    HeadShape heads;
    float scale;
    int32_t window;
};

// ---- reference kernel (fallback) ---------------------------------------------------

constexpr int kRefThreads = 128;
constexpr int kRefWarps = kRefThreads / 32;
constexpr int kRefTile = 64;  // keys per pass; <= kRefThreads so that one thread exponentiates each score
constexpr int kRefDimsPerThread = kMaxHeadDim / kRefThreads;

template <class T>
__global__ void __launch_bounds__(kRefThreads) reference_kernel(DeviceStep st, const float* q, const T* k_pool,
                                                                const T* v_pool, AttnArgs a, float* out) {
    pdl_wait();
    __shared__ float q_s[kMaxHeadDim];
    __shared__ float p_s[kRefTile];  // scores, then their exponentials
    const int32_t row = blockIdx.x, h = blockIdx.y, hd = a.heads.head_dim, bs = st.block_size;
    const int32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int64_t kv_row = int64_t(a.heads.n_kv_heads) * hd;
    const int64_t kv_off = int64_t(h / (a.heads.n_heads / a.heads.n_kv_heads)) * hd;
    const int32_t pos = st.positions[row];
    const int32_t first = window_first(pos, a.window);
    const int32_t* table = st.block_tables + int64_t(st.row_seq[row]) * st.max_blocks_per_seq;
    auto slot = [&](int32_t t) { return int64_t(table[t / bs]) * bs + t % bs; };

    const float* q_row = q + (int64_t(row) * a.heads.n_heads + h) * hd;
    for (int32_t d = threadIdx.x; d < hd; d += kRefThreads) q_s[d] = q_row[d];
    __syncthreads();

    float acc[kRefDimsPerThread] = {};
    float m = -INFINITY, l = 0.0f;
    for (int32_t t0 = first; t0 <= pos; t0 += kRefTile) {
        const int32_t count = min(kRefTile, pos + 1 - t0);
        for (int32_t i = warp; i < count; i += kRefWarps) {
            const T* k = k_pool + slot(t0 + i) * kv_row + kv_off;
            float dot = 0.0f;
            for (int32_t d = lane; d < hd; d += 32) dot += q_s[d] * widen(k[d]);
            dot = warp_sum(dot);
            if (lane == 0) p_s[i] = dot * a.scale;
        }
        __syncthreads();
        float m_new = m;
        for (int32_t i = 0; i < count; ++i) m_new = fmaxf(m_new, p_s[i]);
        const float alpha = expf(m - m_new);
        __syncthreads();
        if (threadIdx.x < count) p_s[threadIdx.x] = expf(p_s[threadIdx.x] - m_new);
        __syncthreads();

        float tile_sum = 0.0f;
#pragma unroll
        for (int j = 0; j < kRefDimsPerThread; ++j) acc[j] *= alpha;
        for (int32_t i = 0; i < count; ++i) {
            const float p = p_s[i];
            const T* v = v_pool + slot(t0 + i) * kv_row + kv_off;
            tile_sum += p;
#pragma unroll
            for (int j = 0; j < kRefDimsPerThread; ++j) {
                const int32_t d = threadIdx.x + j * kRefThreads;
                if (d < hd) acc[j] += p * widen(v[d]);
            }
        }
        l = l * alpha + tile_sum;
        m = m_new;
        __syncthreads();
    }

    float* o = out + (int64_t(row) * a.heads.n_heads + h) * hd;
#pragma unroll
    for (int j = 0; j < kRefDimsPerThread; ++j) {
        const int32_t d = threadIdx.x + j * kRefThreads;
        if (d < hd) o[d] = acc[j] / l;
    }
}

// The fast kernels copy whole 16-byte pieces of each K/V row and read q as
// float4: head_dim a multiple of 4 floats (8 bf16) and 16-byte aligned arrays.
template <class T>
bool fast_path_ok(const float* q, const T* k_pool, const T* v_pool, HeadShape heads, const float* out) {
    return heads.head_dim % kPerCopy<T> == 0 && heads.head_dim <= kMaxHeadDim && is_aligned(q, 16) &&
           is_aligned(k_pool, 16) && is_aligned(v_pool, 16) && is_aligned(out, 16);
}

// True when out8 was written (only the split decode's combine writes it).
template <class T>
bool paged_attention(const DeviceStep& st, const float* q, const T* k_pool, const T* v_pool, HeadShape heads,
                     float scale, int32_t window, float* out, void* out8, void* workspace, size_t workspace_bytes,
                     bool decode_mma, cudaStream_t stream) {
    const bool fast = fast_path_ok(q, k_pool, v_pool, heads, out);
    bool wrote8 = false;
    if (fast && decode_attention_usable(st, heads) &&
        launch_decode_attention(st, q, k_pool, v_pool, heads, scale, window, out, out8, wrote8, workspace,
                                workspace_bytes, decode_mma, stream))
        return wrote8;
    if (fast && st.attn_tiles && st.num_attn_tiles > 0) {  // bf16 tensor cores, or 3xTF32
        launch_prefill_attention(st, q, k_pool, v_pool, heads, scale, window, out, stream);
        return false;
    }
    const dim3 grid(st.num_tokens, heads.n_heads);
    launch_pdl(reference_kernel<T>, grid, kRefThreads, 0, stream, st, q, k_pool, v_pool, AttnArgs{heads, scale, window}, out);
    return false;
}

}  // namespace

bool launch_paged_attention(const DeviceStep& st, const float* q, const void* k_pool, const void* v_pool,
                            PoolType pool, HeadShape heads, float scale, int32_t window, float* out, void* out8,
                            void* workspace, size_t workspace_bytes, bool decode_mma, cudaStream_t stream) {
    if (st.num_tokens == 0) return false;
    if (pool == PoolType::BF16)
        return paged_attention(st, q, static_cast<const bf16*>(k_pool), static_cast<const bf16*>(v_pool), heads,
                               scale, window, out, out8, workspace, workspace_bytes, decode_mma, stream);
    return paged_attention(st, q, static_cast<const float*>(k_pool), static_cast<const float*>(v_pool), heads, scale,
                           window, out, out8, workspace, workspace_bytes, decode_mma, stream);
}

}  // namespace minfer::cuda
