// The mixture-of-experts FFN on the GPU: routing, then every expert's SwiGLU
// FFN over the rows routed to it, then each row's weighted combine. The CPU
// twin is kernels/cpu/moe.cpp.
//
// Every launch's shape depends only on the row count, k and the matrices'
// sizes, never on which experts were chosen: the expert ids stay on the
// device, so a step with MoE layers can be recorded as a CUDA graph.
//
//  - Few rows (decode, up to kMoeGemvMaxRows): each (row, slot) pair is one
//    row of a GEMV over its expert's matrix (moe_gemv_kernel), the expert
//    picked on the device from ids. Weights are read once a pair: at batch 1
//    that is exactly the active experts' bytes, the floor of a decode step.
//  - More rows: a grouped GEMM. moe_sort_kernel sorts the pairs by expert (a
//    counting sort in one CTA) and cuts each expert's run into tiles of at most
//    16 MT rows; moe_mma_kernel's CTA (tile, 128 features) runs the quantized
//    GEMM's tensor-core loop (quant_tiles.cuh's qmm_tile) on that tile and
//    expert, so each expert's weights are decoded once a tile. Its grid covers
//    the most tiles any routing can make; CTAs past the routing's count return.
//
// Under expert parallelism the experts are a slice (global ids first ..
// first + n_experts - 1, the rest on other ranks): pairs routed elsewhere are
// left out of the sort, the GEMV and the combine, and a row with none is 0.
//
// Expert weights of every GGUF format this backend keeps quantized, and plain
// F32/F16/BF16 ones as 32-element blocks (dense_blocks.cuh): the GEMV reads
// them exactly; the grouped GEMM rounds them and the activations to bf16, as
// the quantized GEMM does. F32 experts, which models for tests and references
// use to be exact, take the GEMV at every row count.
#include <cuda_bf16.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/dense_blocks.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/quant_blocks.cuh"
#include "kernels/cuda/quant_tiles.cuh"

namespace minfer::cuda {

namespace {

using namespace tiles;

// ---- routing ----------------------------------------------------------------------------

constexpr int kRouteWarps = 4;  // rows per CTA, a warp each

// One warp a row: softmax over the experts, then k rounds of a warp argmax.
// Round j picks the largest logit after round j-1's pick in (logit desc, id
// asc) order, so nothing needs to remember the picks: the CPU's order
// (probability desc, id asc) on the logits, which softmax keeps.
__global__ void __launch_bounds__(kRouteWarps * 32)
    moe_route_kernel(const float* __restrict__ logits, int32_t rows, int32_t n_experts, int32_t k, bool renormalize,
                     int32_t* __restrict__ ids, float* __restrict__ weights) {
    pdl_wait();
    const int lane = threadIdx.x % 32;
    const int32_t row = int32_t(blockIdx.x) * kRouteWarps + int32_t(threadIdx.x / 32);
    if (row >= rows) return;
    const float* l = logits + int64_t(row) * n_experts;
    float max = -INFINITY;
    for (int32_t e = lane; e < n_experts; e += 32) max = fmaxf(max, l[e]);
    for (int offset = 16; offset > 0; offset /= 2) max = fmaxf(max, __shfl_xor_sync(0xffffffffu, max, offset));
    float sum = 0.0f;
    for (int32_t e = lane; e < n_experts; e += 32) sum += expf(l[e] - max);
    sum = warp_sum(sum);

    float prev = INFINITY, chosen = 0.0f;
    int32_t prev_id = -1;
    for (int32_t j = 0; j < k; ++j) {
        float best = -INFINITY;
        int32_t best_id = INT32_MAX;
        for (int32_t e = lane; e < n_experts; e += 32) {
            const float v = l[e];
            const bool after_prev = v < prev || (v == prev && e > prev_id);
            if (after_prev && (v > best || (v == best && e < best_id))) best = v, best_id = e;
        }
        for (int offset = 16; offset > 0; offset /= 2) {
            const float v = __shfl_xor_sync(0xffffffffu, best, offset);
            const int32_t e = __shfl_xor_sync(0xffffffffu, best_id, offset);
            if (v > best || (v == best && e < best_id)) best = v, best_id = e;
        }
        prev = best, prev_id = best_id;
        const float p = expf(best - max) / sum;
        chosen += p;
        if (lane == 0) ids[int64_t(row) * k + j] = best_id, weights[int64_t(row) * k + j] = p;
    }
    if (renormalize && lane == 0)
        for (int32_t j = 0; j < k; ++j) weights[int64_t(row) * k + j] /= chosen;
}

// ---- grouping (the grouped GEMM's path) ---------------------------------------------------

constexpr int kSortThreads = 1024;

// The expert of pair p in the slice first .. first + n_experts - 1, or -1.
__device__ __forceinline__ int32_t local_expert(const int32_t* ids, int32_t p, int32_t first, int32_t n_experts) {
    const int32_t e = ids[p] - first;
    return e >= 0 && e < n_experts ? e : -1;
}

// The slice's pairs p = row * k + slot sorted by expert into sorted[] (inv[p]:
// where p went), and the tiles of each expert's run: (local expert, first
// sorted index, rows) triples; counts[0] of them, and counts[1] pairs sorted.
// Within an expert the order is the atomics' (results do not depend on it:
// every row of a tile is computed alike).
__global__ void __launch_bounds__(kSortThreads)
    moe_sort_kernel(const int32_t* __restrict__ ids, int32_t pairs, int32_t first, int32_t n_experts,
                    int32_t tile_rows, int32_t* __restrict__ sorted, int32_t* __restrict__ inv,
                    int32_t* __restrict__ tiles, int32_t* __restrict__ counts) {
    extern __shared__ int32_t moe_counts[];  // [n_experts] counts, then [n_experts] cursors
    int32_t* cursor = moe_counts + n_experts;
    pdl_wait();
    for (int32_t e = threadIdx.x; e < n_experts; e += kSortThreads) moe_counts[e] = 0;
    __syncthreads();
    for (int32_t p = threadIdx.x; p < pairs; p += kSortThreads)
        if (const int32_t e = local_expert(ids, p, first, n_experts); e >= 0) atomicAdd(&moe_counts[e], 1);
    __syncthreads();
    if (threadIdx.x == 0) {
        int32_t start = 0, t = 0;
        for (int32_t e = 0; e < n_experts; ++e) {
            const int32_t count = moe_counts[e];
            cursor[e] = start;
            for (int32_t r = 0; r < count; r += tile_rows, ++t) {
                tiles[3 * t] = e;
                tiles[3 * t + 1] = start + r;
                tiles[3 * t + 2] = min(tile_rows, count - r);
            }
            start += count;
        }
        counts[0] = t;
        counts[1] = start;
    }
    __syncthreads();
    for (int32_t p = threadIdx.x; p < pairs; p += kSortThreads) {
        const int32_t e = local_expert(ids, p, first, n_experts);
        const int32_t at = e >= 0 ? atomicAdd(&cursor[e], 1) : -1;
        if (at >= 0) sorted[at] = p;
        inv[p] = at;
    }
}

// xs[i, :] = bf16(x[sorted[i] / k, :]): the activations in expert order, for
// the counts[1] sorted pairs.
__global__ void moe_gather_bf16_kernel(const float* __restrict__ x, const int32_t* __restrict__ sorted, int32_t k,
                                       int32_t dim, const int32_t* __restrict__ counts, __nv_bfloat16* __restrict__ xs) {
    pdl_wait();
    if (int32_t(blockIdx.x) >= counts[1]) return;
    const float* src = x + int64_t(sorted[blockIdx.x] / k) * dim;
    __nv_bfloat16* dst = xs + int64_t(blockIdx.x) * dim;
    for (int32_t c = threadIdx.x; c < dim; c += blockDim.x) dst[c] = __float2bfloat16_rn(src[c]);
}

// One or two projections (blockIdx.z) of the same experts' shape over the tiles.
struct MmaTargets {
    const uint8_t* w[2];
    float* out[2];
    // Target z's (a select, not an index: a parameter array indexed at run time goes to the stack).
    __device__ const uint8_t* weights(unsigned z) const { return z ? w[1] : w[0]; }
    __device__ float* output(unsigned z) const { return z ? out[1] : out[0]; }
};

template <class Q, int MT>
__global__ void __launch_bounds__(kQmmThreads)
    moe_mma_kernel(const __nv_bfloat16* __restrict__ xs, int32_t k, MmaTargets targets, size_t expert_bytes,
                   int32_t n, const int32_t* __restrict__ tiles, const int32_t* __restrict__ num_tiles) {
    pdl_wait();
    const int32_t t = int32_t(blockIdx.y);
    if (t >= *num_tiles) return;
    const int32_t expert = tiles[3 * t], first = tiles[3 * t + 1], rows = tiles[3 * t + 2];
    qmm_tile<Q, MT>(xs + int64_t(first) * k, rows, k, targets.weights(blockIdx.z) + size_t(expert) * expert_bytes, n,
                    0, (k + kQmmK - 1) / kQmmK, targets.output(blockIdx.z) + int64_t(first) * n);
}

// ---- the GEMV path ---------------------------------------------------------------------

// Pair p = blockIdx.y: out[p, :] = x[p / x_div, :] * W_e^T with e = ids[p]'s
// place in the slice, for one or two projections (blockIdx.z); nothing for a
// pair of another slice.
template <class Q>
__global__ void __launch_bounds__(kWarps * 32)
    moe_gemv_kernel(const float* __restrict__ x, int32_t x_div, int32_t k, bool x_aligned, MmaTargets targets,
                    size_t expert_bytes, int32_t n, const int32_t* __restrict__ ids, int32_t first,
                    int32_t n_experts) {
    pdl_wait();
    const int32_t p = int32_t(blockIdx.y);
    const int32_t e = local_expert(ids, p, first, n_experts);
    if (e < 0) return;
    gemv_tile<Q, 1>(x + int64_t(p / x_div) * k, k, x_aligned, targets.weights(blockIdx.z) + size_t(e) * expert_bytes, n,
                    targets.output(blockIdx.z) + int64_t(p) * n);
}

// ---- combine and the shared expert's gate -------------------------------------------------

// out[r, :] = sum over j < k, in order, of weights[r, j] * y[pos(r k + j), :]
// (pos: inv, or the pair itself when inv is null) over the slice's pairs.
__global__ void moe_combine_kernel(const float* __restrict__ y, const int32_t* __restrict__ inv,
                                   const int32_t* __restrict__ ids, int32_t first, int32_t n_experts,
                                   const float* __restrict__ weights, int32_t k, int32_t dim, float* __restrict__ out) {
    pdl_wait();
    const int64_t r = blockIdx.x;
    for (int32_t c = threadIdx.x; c < dim; c += blockDim.x) {
        float acc = 0.0f;
        bool started = false;
        for (int32_t j = 0; j < k; ++j) {
            const int64_t p = r * k + j;
            if (local_expert(ids, int32_t(p), first, n_experts) < 0) continue;
            const int64_t at = inv ? inv[p] : p;
            const float v = weights[p] * y[at * dim + c];
            acc = started ? acc + v : v;
            started = true;
        }
        out[r * dim + c] = acc;
    }
}

__global__ void add_sigmoid_gated_kernel(const float* __restrict__ gate_logit, const float* __restrict__ y,
                                         int32_t dim, float* __restrict__ out) {
    pdl_wait();
    const int64_t r = blockIdx.x;
    const float g = 1.0f / (1.0f + expf(-gate_logit[r]));
    for (int32_t c = threadIdx.x; c < dim; c += blockDim.x) out[r * dim + c] += g * y[r * dim + c];
}

// ---- host side ------------------------------------------------------------------------------

// Calls f(Q{}) with the block struct of an expert format.
template <class F>
void with_format(ExpertFormat format, F&& f) {
    switch (format) {
        case ExpertFormat::Q8_0: f(quant::Q8_0{}); break;
        case ExpertFormat::Q4_0: f(quant::Q4_0{}); break;
        case ExpertFormat::Q4_1: f(quant::Q4_1{}); break;
        case ExpertFormat::Q5_0: f(quant::Q5_0{}); break;
        case ExpertFormat::Q5_1: f(quant::Q5_1{}); break;
        case ExpertFormat::Q4_K: f(quant::Q4_K{}); break;
        case ExpertFormat::Q5_K: f(quant::Q5_K{}); break;
        case ExpertFormat::Q6_K: f(quant::Q6_K{}); break;
        case ExpertFormat::Q8_0x8: f(quant::Q8_0x8{}); break;
        case ExpertFormat::F32: f(quant::F32Block{}); break;
        case ExpertFormat::F16: f(quant::F16Block{}); break;
        case ExpertFormat::BF16: f(quant::BF16Block{}); break;
        default: throw std::invalid_argument("cuda: unknown expert weight format");
    }
}

// F32 experts (test and reference models) stay exact: the GEMV at any row count.
bool moe_takes_gemv(int32_t rows, const ExpertMatrices& gate, const ExpertMatrices& down) {
    return rows <= kMoeGemvMaxRows || gate.format == ExpertFormat::F32 || down.format == ExpertFormat::F32;
}

// The workspace of a chunk of `rows` rows, in 256-byte aligned pieces (the
// grouped GEMM's arrays too once there are more than kMoeGemvMaxRows rows).
struct MoeLayout {
    size_t gate = 0, up = 0, y = 0, xs = 0, act = 0, sorted = 0, inv = 0, tiles = 0, counts = 0, bytes = 0;
};
size_t round256(size_t b) { return (b + 255) / 256 * 256; }
int32_t tile_rows_for(int32_t pairs, int32_t n_experts) { return pairs <= 16 * n_experts ? 16 : 64; }
int32_t max_tiles_for(int32_t pairs, int32_t n_experts) {
    const int32_t t = tile_rows_for(pairs, n_experts);
    return (pairs + t - 1) / t + std::min(n_experts, pairs);
}
MoeLayout moe_layout(int32_t rows, int32_t k, int32_t n_experts, int32_t dim, int32_t ffn) {
    const size_t pairs = size_t(rows) * k;
    MoeLayout l;
    size_t at = 0;
    auto take = [&](size_t& field, size_t bytes) {
        field = at;
        at += round256(bytes);
    };
    take(l.gate, pairs * ffn * sizeof(float));
    take(l.up, pairs * ffn * sizeof(float));
    take(l.y, pairs * dim * sizeof(float));
    if (rows > kMoeGemvMaxRows) {
        take(l.xs, pairs * dim * 2);
        take(l.act, pairs * ffn * 2);
        take(l.sorted, pairs * sizeof(int32_t));
        take(l.inv, pairs * sizeof(int32_t));
        take(l.tiles, size_t(3) * max_tiles_for(int32_t(pairs), n_experts) * sizeof(int32_t));
        take(l.counts, 2 * sizeof(int32_t));
    }
    l.bytes = at;
    return l;
}

template <class Q, int MT>
void moe_mma(const __nv_bfloat16* xs, int32_t k, const MmaTargets& targets, int count, size_t expert_bytes, int32_t n,
             const int32_t* tiles, const int32_t* num_tiles, int32_t max_tiles, cudaStream_t stream) {
    static bool opted_in = false;  // more than 48 KB of shared memory, once per instantiation
    const size_t smem = quant_gemm_smem_bytes(MT);
    if (!opted_in) {
        CUDA_CHECK(cudaFuncSetAttribute(moe_mma_kernel<Q, MT>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
        opted_in = true;
    }
    const dim3 grid(unsigned((n + kQmmFeatures - 1) / kQmmFeatures), unsigned(max_tiles), unsigned(count));
    launch_pdl(moe_mma_kernel<Q, MT>, grid, kQmmThreads, smem, stream, xs, k, targets, expert_bytes, n, tiles,
               num_tiles);
}

template <class Q>
void moe_gemv(const float* x, int32_t x_div, int32_t k, const MmaTargets& targets, int count, size_t expert_bytes,
              int32_t n, const int32_t* ids, int32_t first, int32_t n_experts, int32_t pairs, cudaStream_t stream) {
    const bool aligned = is_aligned(x, 16) && k % 4 == 0;
    const dim3 grid(unsigned((n + kFeatures - 1) / kFeatures), unsigned(pairs), unsigned(count));
    launch_pdl(moe_gemv_kernel<Q>, grid, kWarps * 32, 0, stream, x, x_div, k, aligned, targets, expert_bytes, n, ids,
               first, n_experts);
}

// One chunk of rows: everything after routing.
void moe_chunk(const float* x, const int32_t* ids, const float* weights, int32_t rows, int32_t k, int32_t first,
               int32_t n_experts, const ExpertMatrices& gate, const ExpertMatrices& up, const ExpertMatrices& down,
               float* out, char* ws, cudaStream_t stream) {
    const int32_t dim = gate.cols, ffn = gate.rows, pairs = rows * k;
    const MoeLayout l = moe_layout(rows, k, n_experts, dim, ffn);
    auto* g = reinterpret_cast<float*>(ws + l.gate);
    auto* u = reinterpret_cast<float*>(ws + l.up);
    auto* y = reinterpret_cast<float*>(ws + l.y);
    const MmaTargets gate_up{{static_cast<const uint8_t*>(gate.data), static_cast<const uint8_t*>(up.data)}, {g, u}};
    const MmaTargets down_t{{static_cast<const uint8_t*>(down.data), nullptr}, {y, nullptr}};
    const int32_t* inv = nullptr;
    if (moe_takes_gemv(rows, gate, down)) {
        with_format(gate.format, [&](auto q) {
            moe_gemv<decltype(q)>(x, k, dim, gate_up, 2, gate.expert_bytes, ffn, ids, first, n_experts, pairs, stream);
        });
        launch_swiglu(g, u, int64_t(pairs) * ffn, g, nullptr, nullptr, stream);
        with_format(down.format, [&](auto q) {
            moe_gemv<decltype(q)>(g, 1, ffn, down_t, 1, down.expert_bytes, dim, ids, first, n_experts, pairs, stream);
        });
    } else {
        auto* xs = reinterpret_cast<__nv_bfloat16*>(ws + l.xs);
        auto* act = reinterpret_cast<__nv_bfloat16*>(ws + l.act);
        auto* sorted = reinterpret_cast<int32_t*>(ws + l.sorted);
        auto* inv_w = reinterpret_cast<int32_t*>(ws + l.inv);
        auto* tiles = reinterpret_cast<int32_t*>(ws + l.tiles);
        auto* counts = reinterpret_cast<int32_t*>(ws + l.counts);
        const int32_t* num_tiles = counts;
        const int32_t tile_rows = tile_rows_for(pairs, n_experts), max_tiles = max_tiles_for(pairs, n_experts);
        launch_pdl(moe_sort_kernel, 1, kSortThreads, 2 * sizeof(int32_t) * n_experts, stream, ids, pairs, first,
                   n_experts, tile_rows, sorted, inv_w, tiles, counts);
        launch_pdl(moe_gather_bf16_kernel, unsigned(pairs), 256, 0, stream, x, static_cast<const int32_t*>(sorted), k,
                   dim, static_cast<const int32_t*>(counts), xs);
        auto mma = [&](ExpertFormat f, const __nv_bfloat16* in, int32_t kk, const MmaTargets& t, int count,
                       size_t expert_bytes, int32_t n) {
            with_format(f, [&](auto q) {
                using Q = decltype(q);
                if (tile_rows == 16)
                    moe_mma<Q, 1>(in, kk, t, count, expert_bytes, n, tiles, num_tiles, max_tiles, stream);
                else
                    moe_mma<Q, 4>(in, kk, t, count, expert_bytes, n, tiles, num_tiles, max_tiles, stream);
            });
        };
        mma(gate.format, xs, dim, gate_up, 2, gate.expert_bytes, ffn);
        launch_swiglu(g, u, int64_t(pairs) * ffn, g, act, nullptr, stream);
        mma(down.format, act, ffn, down_t, 1, down.expert_bytes, dim);
        inv = inv_w;
    }
    launch_pdl(moe_combine_kernel, unsigned(rows), 256, 0, stream, static_cast<const float*>(y), inv, ids, first,
               n_experts, weights, k, dim, out);
}

}  // namespace

int expert_block_elems(ExpertFormat format) {
    int elems = 0;
    with_format(format, [&](auto q) { elems = decltype(q)::kElems; });
    return elems;
}

void launch_moe_route(const float* logits, int32_t rows, int32_t n_experts, int32_t k, bool renormalize,
                      int32_t* ids, float* weights, cudaStream_t stream) {
    if (n_experts <= 0 || n_experts > kMoeMaxExperts || k <= 0 || k > n_experts)
        throw std::invalid_argument("launch_moe_route: need 1 <= k <= n_experts <= " + std::to_string(kMoeMaxExperts));
    if (rows == 0) return;
    launch_pdl(moe_route_kernel, unsigned((rows + kRouteWarps - 1) / kRouteWarps), kRouteWarps * 32, 0, stream,
               logits, rows, n_experts, k, renormalize, ids, weights);
    CUDA_CHECK_LAUNCH();
}

size_t moe_workspace_bytes(int32_t rows, int32_t k, int32_t n_experts, int32_t dim, int32_t ffn) {
    return moe_layout(std::min(rows, kMoeChunkRows), k, n_experts, dim, ffn).bytes;
}

void launch_moe_experts(const float* x, const int32_t* ids, const float* weights, int32_t rows, int32_t k,
                        int32_t first_expert, int32_t n_experts, const ExpertMatrices& gate, const ExpertMatrices& up,
                        const ExpertMatrices& down, float* out, void* workspace, size_t workspace_bytes,
                        cudaStream_t stream) {
    const int32_t dim = gate.cols, ffn = gate.rows;
    if (up.rows != ffn || up.cols != dim || down.rows != dim || down.cols != ffn)
        throw std::invalid_argument("launch_moe_experts: the gate, up and down experts' shapes disagree");
    if (n_experts <= 0 || n_experts > kMoeMaxExperts || k <= 0 || k > kMoeMaxExperts)
        throw std::invalid_argument("launch_moe_experts: need 1 <= k, n_experts <= " + std::to_string(kMoeMaxExperts));
    if (moe_workspace_bytes(rows, k, n_experts, dim, ffn) > workspace_bytes)
        throw std::invalid_argument("launch_moe_experts: workspace too small");
    for (int32_t r0 = 0; r0 < rows; r0 += kMoeChunkRows) {
        const int32_t n = std::min(kMoeChunkRows, rows - r0);
        moe_chunk(x + int64_t(r0) * dim, ids + int64_t(r0) * k, weights + int64_t(r0) * k, n, k, first_expert,
                  n_experts, gate, up, down, out + int64_t(r0) * dim, static_cast<char*>(workspace), stream);
    }
    CUDA_CHECK_LAUNCH();
}

void launch_add_sigmoid_gated(const float* gate_logit, const float* y, int32_t rows, int32_t dim, float* out,
                              cudaStream_t stream) {
    if (rows == 0) return;
    launch_pdl(add_sigmoid_gated_kernel, unsigned(rows), 256, 0, stream, gate_logit, y, dim, out);
    CUDA_CHECK_LAUNCH();
}

}  // namespace minfer::cuda
