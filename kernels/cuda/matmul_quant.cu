// Quantized weights on the GPU, kept in their GGUF blocks (quant_blocks.cuh
// decodes each type):
//  - few rows (decode): a GEMV that streams the blocks once for all rows;
//  - many rows (prefill): the weight widened to bf16 into a scratch matrix
//    (widen_kernel), then the cuBLASLt bf16 GEMM (the tensor cores do the work);
//  - the embedding gather.
//
// The GEMV. A CTA of 4 warps owns 4 output features; its warps take turns
// over tiles of 1024 weights along k. Most block sizes (18, 20, 34 bytes...)
// leave blocks only 2-byte aligned, so a warp copies each feature's tile into
// shared memory with 16-byte cp.async (from the 16-byte boundary below the
// tile, which needs the allocation padded to 16 bytes) and decodes from there;
// the next tile's copy is in flight while this one is decoded. Each lane
// takes units of 16 or 32 weights, loads each feature's unit and scales into
// registers, then decodes 8 weights at a time, reusing the activations it
// loads for all 4 features. Accumulation is fp32; activations stay fp32.
#include <cuda_bf16.h>

#include <algorithm>
#include <stdexcept>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/quant_blocks.cuh"
#include "kernels/cuda/quant_tiles.cuh"

namespace minfer::cuda {

namespace {

using namespace tiles;

template <class Q, int Rows>
__global__ void __launch_bounds__(kWarps * 32)
    quant_gemv_kernel(const float* __restrict__ x, int32_t k, bool x_aligned, const uint8_t* __restrict__ w,
                      int32_t n, float* __restrict__ out) {
    gemv_tile<Q, Rows>(x, k, x_aligned, w, n, out);  // it waits (pdl_wait) once its first tile is on its way
}

// An all-zero block of any format (every format decodes it to zeros).
__device__ __align__(16) const uint8_t kZeroBlock[256] = {};

// out[i, :k] = row ids[i] (row i when ids is null) of W, decoded; one thread per
// unit. With ids, W holds rows table.first .. table.first + table.count - 1:
// other ids give zeros (a vocabulary-parallel embedding's shard).
template <class Q, class Out>
__global__ void dequant_rows_kernel(const uint8_t* __restrict__ w, const int32_t* __restrict__ ids, int32_t rows,
                                    int32_t k, int64_t ld, TableRows table, Out* __restrict__ out) {
    const int64_t units_per_row = int64_t(k / Q::kElems) * Q::kUnits;
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= rows * units_per_row) return;
    const int64_t row = i / units_per_row;
    const int uu = int(i % units_per_row), b = uu / Q::kUnits, u = uu % Q::kUnits;
    const int64_t src = ids ? ids[row] - table.first : row;
    const bool held = !ids || (src >= 0 && src < table.count);
    const uint8_t* block = held ? w + (src * (k / Q::kElems) + b) * Q::kBytes : kZeroBlock;
    decode_unit<Q>(Q::load(block, u), u, out + row * ld + int64_t(b) * Q::kElems, SameColumn{});
}

// The prefill widening, version 2: a CTA decodes kWidenThreads consecutive
// units (32 K-type blocks, 128 legacy ones) into shared memory through the
// block structs, then writes them out as 16-byte stores, consecutive threads on
// consecutive bytes. Version 1 (dequant_rows_kernel, still the embedding
// gather's) decoded straight to global memory: a warp's store scattered 8-byte
// pieces over four blocks' columns, a quarter of each 32-byte sector at a time.
constexpr int kWidenThreads = 256;

template <class Q>
__global__ void __launch_bounds__(kWidenThreads)
    widen_kernel(const uint8_t* __restrict__ w, int64_t blocks, int32_t blocks_per_row, int64_t ld,
                 __nv_bfloat16* __restrict__ out) {
    constexpr int kBlocks = kWidenThreads / Q::kUnits, kChunks = Q::kElems / 8;  // 16-byte chunks a block
    __shared__ __align__(16) __nv_bfloat16 tile[kBlocks * Q::kElems];
    pdl_wait();
    const int64_t first = int64_t(blockIdx.x) * kBlocks;
    const int slot = threadIdx.x / Q::kUnits, u = threadIdx.x % Q::kUnits;
    if (first + slot < blocks)
        decode_unit<Q>(Q::load(w + (first + slot) * Q::kBytes, u), u, tile + slot * Q::kElems, SameColumn{});
    __syncthreads();
    for (int c = threadIdx.x; c < kBlocks * kChunks; c += kWidenThreads) {
        const int64_t g = first + c / kChunks;
        if (g >= blocks) break;
        const int64_t row = g / blocks_per_row, b = g - row * blocks_per_row;
        *reinterpret_cast<uint4*>(out + row * ld + b * Q::kElems + (c % kChunks) * 8) =
            reinterpret_cast<const uint4*>(tile)[c];
    }
}

// Split blockIdx.y takes stretches [y * per_split, (y + 1) * per_split) and writes out + y * rows * n.
template <class Q, int MT>
__global__ void __launch_bounds__(kQmmThreads)
    quant_gemm_kernel(const __nv_bfloat16* __restrict__ x, int32_t rows, int32_t k, const uint8_t* __restrict__ w,
                      int32_t n, int32_t per_split, float* __restrict__ out) {
    // qmm_tile waits (pdl_wait) once its first weights are on their way.
    const int32_t first = int32_t(blockIdx.y) * per_split, last = min((k + kQmmK - 1) / kQmmK, first + per_split);
    qmm_tile<Q, MT>(x, rows, k, w, n, first, last, out + int64_t(blockIdx.y) * rows * n);
}

// out[i] = parts[0][i] + parts[1][i] + ..., in that order.
__global__ void sum_splits_kernel(const float* __restrict__ parts, int32_t splits, int64_t count,
                                  float* __restrict__ out) {
    pdl_wait();
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
        float sum = 0.0f;
        for (int32_t p = 0; p < splits; ++p) sum += parts[p * count + i];
        out[i] = sum;
    }
}

int sm_count() {
    static const int count = [] {
        int device = 0, sms = 0;
        CUDA_CHECK(cudaGetDevice(&device));
        CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
        return sms;
    }();
    return count;
}

// Calls f(Q{}) with the block struct of t.
template <class F>
void with_type(QType t, F&& f) {
    switch (t) {
        case QType::Q8_0: f(quant::Q8_0{}); break;
        case QType::Q4_0: f(quant::Q4_0{}); break;
        case QType::Q4_1: f(quant::Q4_1{}); break;
        case QType::Q5_0: f(quant::Q5_0{}); break;
        case QType::Q5_1: f(quant::Q5_1{}); break;
        case QType::Q4_K: f(quant::Q4_K{}); break;
        case QType::Q5_K: f(quant::Q5_K{}); break;
        case QType::Q6_K: f(quant::Q6_K{}); break;
        case QType::Q8_0x8: f(quant::Q8_0x8{}); break;
        default: throw std::invalid_argument("cuda: unknown quantized type");
    }
}

template <class Q, int Rows>
void gemv(const float* x, int32_t k, const void* w, int32_t n, float* out, cudaStream_t stream) {
    const bool aligned = is_aligned(x, 16);  // k % 32 == 0 keeps every row so
    launch_pdl(quant_gemv_kernel<Q, Rows>, (n + kFeatures - 1) / kFeatures, kWarps * 32, 0, stream,
        x, k, aligned, static_cast<const uint8_t*>(w), n, out);
}

template <class Q, int MT>
void quant_gemm(const __nv_bfloat16* x, int32_t rows, int32_t k, const void* w, int32_t n, int32_t splits,
                int32_t per_split, float* out, cudaStream_t stream) {
    static bool opted_in = false;  // more than 48 KB of shared memory, once per instantiation
    const size_t smem = quant_gemm_smem_bytes(MT);
    if (!opted_in) {
        CUDA_CHECK(cudaFuncSetAttribute(quant_gemm_kernel<Q, MT>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
        opted_in = true;
    }
    const dim3 grid(unsigned((n + kQmmFeatures - 1) / kQmmFeatures), unsigned(splits));
    launch_pdl(quant_gemm_kernel<Q, MT>, grid, kQmmThreads, smem, stream, x, rows, k, static_cast<const uint8_t*>(w),
               n, per_split, out);
}

template <class Q, class Out>
void dequant_rows(const void* w, const int32_t* ids, int32_t rows, int32_t k, int64_t ld, Out* out,
                  cudaStream_t stream, TableRows table = {}) {
    const int64_t threads = int64_t(rows) * (k / Q::kElems) * Q::kUnits;
    if (threads == 0) return;
    dequant_rows_kernel<Q, Out><<<unsigned((threads + 255) / 256), 256, 0, stream>>>(
        static_cast<const uint8_t*>(w), ids, rows, k, ld, table, out);
}

}  // namespace

int quant_block_elems(QType t) {
    int elems = 0;
    with_type(t, [&](auto q) { elems = decltype(q)::kElems; });
    return elems;
}

int quant_block_bytes(QType t) {
    int bytes = 0;
    with_type(t, [&](auto q) { bytes = decltype(q)::kBytes; });
    return bytes;
}

void launch_quant_gemv(QType t, const float* x, int32_t rows, int32_t k, const void* w, int32_t n, float* out,
                       cudaStream_t stream) {
    // One instantiation per row count up to kQuantGemvMaxRows, so the accumulators stay in registers.
    with_type(t, [&](auto q) {
        using Q = decltype(q);
        switch (rows) {
            case 1: gemv<Q, 1>(x, k, w, n, out, stream); break;
            case 2: gemv<Q, 2>(x, k, w, n, out, stream); break;
            case 3: gemv<Q, 3>(x, k, w, n, out, stream); break;
            case 4: gemv<Q, 4>(x, k, w, n, out, stream); break;
            case 5: gemv<Q, 5>(x, k, w, n, out, stream); break;
            case 6: gemv<Q, 6>(x, k, w, n, out, stream); break;
            case 7: gemv<Q, 7>(x, k, w, n, out, stream); break;
            case 8: gemv<Q, 8>(x, k, w, n, out, stream); break;
            default: throw std::invalid_argument("launch_quant_gemv: rows must be 1..8");
        }
    });
    CUDA_CHECK_LAUNCH();
}

size_t quant_gemm_workspace_bytes(int32_t rows, int32_t k) { return (size_t(rows) * k * 2 + 15) / 16 * 16; }

bool quant_gemm_usable(bool enabled, int32_t rows, int32_t k, size_t workspace_bytes) {
    return enabled && rows > kQuantGemvMaxRows && rows <= kQuantMmaMaxRows &&
           quant_gemm_workspace_bytes(rows, k) <= workspace_bytes;
}

void launch_quant_gemm(QType t, const float* x, int32_t rows, int32_t k, const void* w, int32_t n, float* out,
                       void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    if (rows <= 0 || rows > kQuantMmaMaxRows) throw std::invalid_argument("launch_quant_gemm: rows must be 1..64");
    if (!is_aligned(workspace, 16))
        throw std::invalid_argument("launch_quant_gemm: the workspace must be 16-byte aligned");
    const size_t x_bytes = quant_gemm_workspace_bytes(rows, k);
    if (x_bytes > workspace_bytes) throw std::invalid_argument("launch_quant_gemm: workspace too small");
    auto* xb = static_cast<__nv_bfloat16*>(workspace);
    launch_rows_to_bf16(x, rows, k, k, xb, stream);

    // The partial sums of the splits of k go beside xb in the workspace.
    const QuantGemmSplit split = quant_gemm_split(rows, k, n, workspace_bytes);
    const int32_t splits = split.splits, per_split = split.per_split;
    float* parts = splits > 1 ? reinterpret_cast<float*>(static_cast<char*>(workspace) + x_bytes) : out;
    with_type(t, [&](auto q) {
        using Q = decltype(q);
        switch ((rows + 15) / 16) {
            case 1: quant_gemm<Q, 1>(xb, rows, k, w, n, splits, per_split, parts, stream); break;
            case 2: quant_gemm<Q, 2>(xb, rows, k, w, n, splits, per_split, parts, stream); break;
            case 3: quant_gemm<Q, 3>(xb, rows, k, w, n, splits, per_split, parts, stream); break;
            default: quant_gemm<Q, 4>(xb, rows, k, w, n, splits, per_split, parts, stream); break;
        }
    });
    if (splits > 1) launch_sum_splits(parts, splits, int64_t(rows) * n, out, stream);
    CUDA_CHECK_LAUNCH();
}

QuantGemmSplit quant_gemm_split(int32_t rows, int32_t k, int32_t n, size_t workspace_bytes) {
    // Two waves of CTAs (one fits an SM), each split kQmmMinStretches stretches at
    // least, as many as the workspace holds partial sums for, none empty.
    const int32_t tiles = (n + kQmmFeatures - 1) / kQmmFeatures, stretches = (k + kQmmK - 1) / kQmmK;
    const size_t x_bytes = quant_gemm_workspace_bytes(rows, k), part_bytes = sizeof(float) * size_t(rows) * n;
    int32_t splits = std::min({(2 * sm_count() + tiles - 1) / tiles, kQmmMaxSplits,
                               std::max(1, stretches / kQmmMinStretches)});
    while (splits > 1 && x_bytes + splits * part_bytes > workspace_bytes) --splits;
    const int32_t per_split = (stretches + splits - 1) / splits;
    return {(stretches + per_split - 1) / per_split, per_split};
}

void launch_sum_splits(const float* parts, int32_t splits, int64_t count, float* out, cudaStream_t stream) {
    launch_pdl(sum_splits_kernel, unsigned(std::min<int64_t>((count + 255) / 256, 4 * sm_count())), 256, 0, stream,
               parts, splits, count, out);
}

void launch_quant_embedding(QType t, const DeviceStep& st, const void* w, int32_t k, TableRows rows, float* out,
                            cudaStream_t stream) {
    with_type(t, [&](auto q) { dequant_rows<decltype(q)>(w, st.token_ids, st.num_tokens, k, k, out, stream, rows); });
    CUDA_CHECK_LAUNCH();
}

void launch_quant_to_bf16(QType t, const void* w, int32_t n, int32_t k, int64_t ldw, void* out, cudaStream_t stream) {
    if (ldw % 8 || !is_aligned(out, 16)) {  // rows not on 16-byte boundaries: version 1
        launch_quant_to_bf16_v1(t, w, n, k, ldw, out, stream);
        return;
    }
    with_type(t, [&](auto q) {
        using Q = decltype(q);
        const int64_t blocks = int64_t(n) * (k / Q::kElems);
        if (blocks == 0) return;
        constexpr int kBlocksPerCta = kWidenThreads / Q::kUnits;
        launch_pdl(widen_kernel<Q>, unsigned((blocks + kBlocksPerCta - 1) / kBlocksPerCta), kWidenThreads, 0, stream,
                   static_cast<const uint8_t*>(w), blocks, k / Q::kElems, ldw, static_cast<__nv_bfloat16*>(out));
    });
    CUDA_CHECK_LAUNCH();
}

void launch_quant_to_bf16_v1(QType t, const void* w, int32_t n, int32_t k, int64_t ldw, void* out,
                             cudaStream_t stream) {
    with_type(t, [&](auto q) {
        dequant_rows<decltype(q)>(w, nullptr, n, k, ldw, static_cast<__nv_bfloat16*>(out), stream);
    });
    CUDA_CHECK_LAUNCH();
}

}  // namespace minfer::cuda
