// Quantized weights on the GPU, kept in their GGUF blocks (quant_blocks.cuh
// decodes each type):
//  - few rows (decode): a GEMV that streams the blocks once for all rows;
//  - many rows (prefill): the weight widened to bf16 into a scratch matrix
//    (widen_kernel), then the cuBLASLt bf16 GEMM (the tensor cores do the work);
//  - the embedding gather.
//
// The GEMV. A CTA of 4 warps owns 4 output features; its warps take turns
// over tiles of 1024 weights along k. Most block sizes (18, 34, 210 bytes...)
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
#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/quant_blocks.cuh"
#include "kernels/cuda/reduce.cuh"

namespace minfer::cuda {

namespace {

constexpr int kWarps = 4;        // per CTA, splitting k
constexpr int kFeatures = 4;     // output features per CTA
constexpr int kTileElems = 1024; // weights of one feature per tile: 32 or 64 per lane

__device__ __forceinline__ void load4(const float* p, bool aligned, float* v) {
    if (aligned) {
        const float4 f = *reinterpret_cast<const float4*>(p);
        v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
    } else {
        v[0] = p[0], v[1] = p[1], v[2] = p[2], v[3] = p[3];
    }
}

template <class Q, int Rows>
__global__ void __launch_bounds__(kWarps * 32)
    quant_gemv_kernel(const float* __restrict__ x, int32_t k, bool x_aligned, const uint8_t* __restrict__ w,
                      int32_t n, float* __restrict__ out) {
    pdl_wait();
    constexpr int kTileBlocks = kTileElems / Q::kElems;
    constexpr int kStageBytes = (kTileBlocks * Q::kBytes + 15 + 15 + 15) / 16 * 16;  // both ends rounded out
    __shared__ __align__(16) uint8_t stage[kWarps][2][kFeatures][kStageBytes];
    __shared__ float partial[kWarps][Rows][kFeatures];

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int f0 = blockIdx.x * kFeatures;
    const int blocks = k / Q::kElems, tiles = (blocks + kTileBlocks - 1) / kTileBlocks;
    const size_t row_bytes = size_t(blocks) * Q::kBytes;

    // Where tile t of feature f0 + f starts (features past n read the last one's).
    auto tile_start = [&](int f, int t) {
        return w + size_t(min(f0 + f, n - 1)) * row_bytes + size_t(t) * kTileBlocks * Q::kBytes;
    };
    auto stage_tile = [&](int t, int buf) {
        if (t < tiles) {
            const uintptr_t bytes = uintptr_t(min(kTileBlocks, blocks - t * kTileBlocks)) * Q::kBytes;
#pragma unroll
            for (int f = 0; f < kFeatures; ++f) {
                const auto p = reinterpret_cast<uintptr_t>(tile_start(f, t)), lo = p & ~uintptr_t(15);
                const int words = int((p + bytes - lo + 15) / 16);
                for (int i = lane; i < words; i += 32)
                    cp_async16(&stage[warp][buf][f][16 * i], reinterpret_cast<const void*>(lo + 16 * i));
            }
        }
        cp_async_commit();  // possibly empty: every iteration waits on the same count
    };

    float acc[Rows][kFeatures] = {};
    stage_tile(warp, 0);
    int buf = 0;
    for (int t = warp; t < tiles; t += kWarps, buf ^= 1) {
        stage_tile(t + kWarps, buf ^ 1);
        cp_async_wait<1>();
        __syncwarp();
        const int units = min(kTileBlocks, blocks - t * kTileBlocks) * Q::kUnits;
#pragma unroll
        for (int j = 0; j < kTileBlocks * Q::kUnits / 32; ++j) {
            const int uu = lane + 32 * j;
            if (uu >= units) break;
            const int b = uu / Q::kUnits, u = uu % Q::kUnits;
            typename Q::Unit unit[kFeatures];
#pragma unroll
            for (int f = 0; f < kFeatures; ++f) {
                const int offset = int(reinterpret_cast<uintptr_t>(tile_start(f, t)) & 15);
                unit[f] = Q::load(&stage[warp][buf][f][offset + b * Q::kBytes], u);
            }
            const float* xb = x + size_t(t * kTileBlocks + b) * Q::kElems;
#pragma unroll
            for (int s = 0; s < Q::kSubs; ++s) {
                float xv[Rows][8];
#pragma unroll
                for (int r = 0; r < Rows; ++r) {
                    load4(xb + size_t(r) * k + Q::col(u, s, 0), x_aligned, xv[r]);
                    load4(xb + size_t(r) * k + Q::col(u, s, 1), x_aligned, xv[r] + 4);
                }
#pragma unroll
                for (int f = 0; f < kFeatures; ++f) {
                    float wv[8];
                    Q::dequant(unit[f], s, wv);
#pragma unroll
                    for (int r = 0; r < Rows; ++r)
#pragma unroll
                        for (int i = 0; i < 8; ++i) acc[r][f] = fmaf(wv[i], xv[r][i], acc[r][f]);
                }
            }
        }
        __syncwarp();  // the buffer is refilled next iteration
    }
    cp_async_wait<0>();

#pragma unroll
    for (int r = 0; r < Rows; ++r)
#pragma unroll
        for (int f = 0; f < kFeatures; ++f) {
            const float s = warp_sum(acc[r][f]);
            if (lane == 0) partial[warp][r][f] = s;
        }
    __syncthreads();
    if (threadIdx.x < Rows * kFeatures) {
        const int r = threadIdx.x / kFeatures, f = threadIdx.x % kFeatures;
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < kWarps; ++i) s += partial[i][r][f];
        if (f0 + f < n) out[size_t(r) * n + f0 + f] = s;
    }
}

__device__ __forceinline__ void store4(float* p, const float* v) { p[0] = v[0], p[1] = v[1], p[2] = v[2], p[3] = v[3]; }
__device__ __forceinline__ void store4(__nv_bfloat16* p, const float* v) {  // 8-byte aligned: k is a multiple of 32
    *reinterpret_cast<uint2*>(p) = pack_bf16x4(v[0], v[1], v[2], v[3]);
}

struct SameColumn {
    __device__ int operator()(int c) const { return c; }
};

// Unit u of a block, decoded into the block's kElems outputs at o; its column c
// goes to o + at(c) (the quantized GEMM's padded tile moves columns apart).
template <class Q, class Out, class At>
__device__ __forceinline__ void decode_unit(const typename Q::Unit& unit, int u, Out* o, At at) {
#pragma unroll
    for (int s = 0; s < Q::kSubs; ++s) {
        float v[8];
        Q::dequant(unit, s, v);
        store4(o + at(Q::col(u, s, 0)), v);
        store4(o + at(Q::col(u, s, 1)), v + 4);
    }
}

// out[i, :k] = row ids[i] (row i when ids is null) of W, decoded; one thread per unit.
template <class Q, class Out>
__global__ void dequant_rows_kernel(const uint8_t* __restrict__ w, const int32_t* __restrict__ ids, int32_t rows,
                                    int32_t k, int64_t ld, Out* __restrict__ out) {
    const int64_t units_per_row = int64_t(k / Q::kElems) * Q::kUnits;
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= rows * units_per_row) return;
    const int64_t row = i / units_per_row;
    const int uu = int(i % units_per_row), b = uu / Q::kUnits, u = uu % Q::kUnits;
    const int64_t src = ids ? ids[row] : row;
    decode_unit<Q>(Q::load(w + (src * (k / Q::kElems) + b) * Q::kBytes, u), u, out + row * ld + int64_t(b) * Q::kElems,
                   SameColumn{});
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

// ---- the quantized GEMM for batched decode (kQuantGemvMaxRows + 1 to kQuantMmaMaxRows rows) ----
//
// Widening whole matrices before the cuBLASLt GEMM costs a 64-sequence decode
// step of llama3-8b Q4_K_M 4.9 GB read and 15 GB written, then the 15 GB read
// again. This kernel reads each block once: a CTA owns 128 output features for
// all of the step's rows, and for each stretch of 256 weights along k it
// decodes its features' units into a bf16 tile in shared memory (decode_unit,
// as the widening does) and multiplies it with the rows' activations (bf16,
// converted once per matmul) on bf16 m16n8k16 tensor cores with fp32
// accumulation: the numbers of the widen + GEMM path, without the 30 GB. Warp w
// owns features 16w..16w+15. While the tensor cores work on one stretch, the
// next stretch's units are in flight to registers and its activations to the
// other half of a double buffer (cp.async).
//
// Each CTA reads the activations of every row: the more features it owns, the
// less often they are read (64 rows of one stretch are 32 KB from L2 against
// 18 KB of Q4_K weights for 128 features). A 4096-feature matrix is then only
// 32 CTAs, a quarter of an H200's SMs, each walking all of k: such matrices
// split k over gridDim.y CTAs, which write partial sums that sum_splits_kernel
// adds in a fixed order (the result does not depend on which split finishes
// first).
constexpr int kQmmThreads = 256;
constexpr int kQmmFeatures = 128;      // per CTA, 16 per warp
constexpr int kQmmK = 256;             // weights along k per stretch: one K-type block, 8 legacy ones
constexpr int kQmmLd = kQmmK + 8;      // activation rows, in bf16: 16-byte aligned, and 8 of them on distinct banks
// Weight rows: 8 bf16 of padding after every 64 columns, and 8 at the end. The
// threads of a warp decode units of 4 features (8 units each): unpadded, a
// unit's columns 64(u/2) + ... put units u, u+2, u+4, u+6 on the same banks
// (ncu: shared stores 8.1-way conflicted, 75% of their wavefronts). The padding
// moves each 64 columns 4 banks on; rows 148 words apart keep ldmatrix's 8
// rows on distinct banks.
constexpr int kQmmWLd = kQmmK + kQmmK / 64 * 8 + 8;
__device__ __forceinline__ int qmm_wcol(int c) { return c + (c >> 6) * 8; }

constexpr int kQmmMaxSplits = 8;
constexpr int kQmmMinStretches = 4;    // per split at least: each split refills its pipeline once

size_t quant_gemm_smem_bytes(int m_tiles) {
    return sizeof(__nv_bfloat16) * (kQmmWLd * kQmmFeatures + kQmmLd * 2 * 16 * m_tiles);
}

// MT: 16-row tiles of activations (rows <= 16 MT). Split blockIdx.y takes
// stretches [y * per_split, (y + 1) * per_split) and writes out + y * rows * n.
template <class Q, int MT>
__global__ void __launch_bounds__(kQmmThreads)
    quant_gemm_kernel(const __nv_bfloat16* __restrict__ x, int32_t rows, int32_t k, const uint8_t* __restrict__ w,
                      int32_t n, int32_t per_split, float* __restrict__ out) {
    constexpr int kBlocks = kQmmK / Q::kElems;                                // per feature and stretch
    constexpr int kUnitsPerThread = kQmmFeatures * kBlocks * Q::kUnits / kQmmThreads;  // 4 or 8
    static_assert(kQmmFeatures == 16 * (kQmmThreads / 32), "a warp owns 16 features");
    constexpr int kXTile = 16 * MT * kQmmLd;
    using Unit = typename Q::Unit;
    extern __shared__ float4 qmm_smem4[];
    __nv_bfloat16* w_s = reinterpret_cast<__nv_bfloat16*>(qmm_smem4);  // [kQmmFeatures][kQmmWLd]
    __nv_bfloat16* x_s = w_s + kQmmFeatures * kQmmWLd;                   // [2][16 MT][kQmmLd]
    pdl_wait();
    const int32_t f0 = int32_t(blockIdx.x) * kQmmFeatures, blocks_per_row = k / Q::kElems;
    const int32_t first = int32_t(blockIdx.y) * per_split, last = min((k + kQmmK - 1) / kQmmK, first + per_split);
    out += int64_t(blockIdx.y) * rows * n;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g8 = lane / 4, t4 = lane % 4;

    // Thread t's j-th unit of a stretch: unit index t + j * kQmmThreads, as
    // (feature, block, unit). Past n or past k the last feature or block is read
    // again (finite weights): its products meet zero activations or are not stored.
    auto unit_at = [&](int j, int& f, int& b, int& u) {
        const int i = int(threadIdx.x) + j * kQmmThreads;
        f = i / (kBlocks * Q::kUnits);
        b = i / Q::kUnits % kBlocks;
        u = i % Q::kUnits;
    };
    auto load_units = [&](int32_t stretch, Unit (&units)[kUnitsPerThread]) {
#pragma unroll
        for (int j = 0; j < kUnitsPerThread; ++j) {
            int f, b, u;
            unit_at(j, f, b, u);
            const int64_t feature = min(f0 + f, n - 1), block = min(stretch * kBlocks + b, blocks_per_row - 1);
            units[j] = Q::load(w + (feature * blocks_per_row + block) * Q::kBytes, u);
        }
    };
    // Rows past `rows` and columns past k are zeros.
    auto load_x = [&](int stage, int32_t stretch) {
        __nv_bfloat16* xs = x_s + stage * kXTile;
        const int32_t k0 = stretch * kQmmK;
        for (int i = threadIdx.x; i < 16 * MT * (kQmmK / 8); i += kQmmThreads) {
            const int r = i / (kQmmK / 8), c = 8 * (i % (kQmmK / 8));
            const bool ok = r < rows && k0 + c < k;
            cp_async16(xs + r * kQmmLd + c, ok ? x + int64_t(r) * k + k0 + c : x, ok);
        }
    };

    Unit units[kUnitsPerThread];
    load_units(first, units);
    load_x(0, first);
    cp_async_commit();
    float acc[MT][2][4] = {};
    // ldmatrix row addresses (lane j: row j % 8 of matrix j / 8). A: rows x k,
    // matrices (rows 0-7, k 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15).
    // B: features x k, matrices (features 0-7, k 0-7), (0-7, 8-15), (8-15, 0-7), (8-15, 8-15).
    const int a_row = (lane & 7) + ((lane >> 3) & 1) * 8, a_col = (lane >> 4) * 8;
    const int b_row = (lane & 7) + (lane >> 4) * 8, b_col = ((lane >> 3) & 1) * 8;
    for (int32_t st = first; st < last; ++st) {
        const int stage = (st - first) & 1;
        __syncthreads();  // every warp is done with the previous stretch's tiles
#pragma unroll
        for (int j = 0; j < kUnitsPerThread; ++j) {
            int f, b, u;
            unit_at(j, f, b, u);
            const int first = b * Q::kElems;  // the block's first column in the tile
            decode_unit<Q>(units[j], u, w_s + f * kQmmWLd, [first](int c) { return qmm_wcol(first + c); });
        }
        if (st + 1 < last) load_x(stage ^ 1, st + 1);
        cp_async_commit();
        cp_async_wait<1>();  // this stretch's activations have landed
        __syncthreads();
        if (st + 1 < last) load_units(st + 1, units);  // in flight during the products
        const __nv_bfloat16* xs = x_s + stage * kXTile;
#pragma unroll 4
        for (int kk = 0; kk < kQmmK; kk += 16) {
            uint32_t bf[4];
            ldmatrix_x4(bf, w_s + (warp * 16 + b_row) * kQmmWLd + qmm_wcol(kk) + b_col);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                uint32_t af[4];
                ldmatrix_x4(af, xs + (mt * 16 + a_row) * kQmmLd + kk + a_col);
                mma_bf16(acc[mt][0], af, bf[0], bf[1]);
                mma_bf16(acc[mt][1], af, bf[2], bf[3]);
            }
        }
    }
    // Element e of acc[mt][nf]: row 16 mt + g8 + 8 (e / 2), feature 16 warp + 8 nf + 2 t4 + e % 2.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nf = 0; nf < 2; ++nf)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int32_t r = mt * 16 + g8 + 8 * (e / 2), f = f0 + warp * 16 + nf * 8 + 2 * t4 + e % 2;
                if (r < rows && f < n) out[int64_t(r) * n + f] = acc[mt][nf][e];
            }
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
                  cudaStream_t stream) {
    const int64_t threads = int64_t(rows) * (k / Q::kElems) * Q::kUnits;
    if (threads == 0) return;
    dequant_rows_kernel<Q, Out><<<unsigned((threads + 255) / 256), 256, 0, stream>>>(
        static_cast<const uint8_t*>(w), ids, rows, k, ld, out);
}

}  // namespace

int quant_block_elems(QType t) {
    int elems = 0;
    with_type(t, [&](auto q) { elems = decltype(q)::kElems; });
    return elems;
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

    // Splits of k: two waves of CTAs (one fits an SM), each split kQmmMinStretches stretches
    // at least, and their partial sums beside xb in the workspace.
    const int32_t tiles = (n + kQmmFeatures - 1) / kQmmFeatures, stretches = (k + kQmmK - 1) / kQmmK;
    const size_t part_bytes = sizeof(float) * size_t(rows) * n;
    int32_t splits = std::min({(2 * sm_count() + tiles - 1) / tiles, kQmmMaxSplits,
                               std::max(1, stretches / kQmmMinStretches)});
    while (splits > 1 && x_bytes + splits * part_bytes > workspace_bytes) --splits;
    const int32_t per_split = (stretches + splits - 1) / splits;
    splits = (stretches + per_split - 1) / per_split;  // none empty
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
    if (splits > 1) {
        const int64_t count = int64_t(rows) * n;
        launch_pdl(sum_splits_kernel, unsigned(std::min<int64_t>((count + 255) / 256, 4 * sm_count())), 256, 0,
                   stream, static_cast<const float*>(parts), splits, count, out);
    }
    CUDA_CHECK_LAUNCH();
}

void launch_quant_embedding(QType t, const DeviceStep& st, const void* w, int32_t k, float* out, cudaStream_t stream) {
    with_type(t, [&](auto q) { dequant_rows<decltype(q)>(w, st.token_ids, st.num_tokens, k, k, out, stream); });
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
