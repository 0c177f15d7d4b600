// The inner loops of the quantized matmuls, shared by matmul_quant.cu (one
// matrix) and moe.cu (a launch over many experts' matrices): each is a
// __device__ function doing one CTA's work on the matrix and rows it is
// handed, so a kernel picks those (a split of k, an expert's rows) and calls it.
// The block structs are quant_blocks.cuh's; the plain types of moe.cu's
// experts come as 32-element blocks too (dense_blocks.cuh).
#pragma once

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/reduce.cuh"

namespace minfer::cuda::tiles {

constexpr int kWarps = 4;        // per CTA, splitting k
constexpr int kFeatures = 4;     // output features per CTA

__device__ __forceinline__ void load4(const float* p, bool aligned, float* v) {
    if (aligned) {
        const float4 f = *reinterpret_cast<const float4*>(p);
        v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
    } else {
        v[0] = p[0], v[1] = p[1], v[2] = p[2], v[3] = p[3];
    }
}

// Weights of one feature per tile: 1024 (32 or 64 per lane) where that is at
// most 1088 bytes, fewer for the plain types (the stages share 48 KB).
template <class Q>
constexpr int gemv_tile_elems() {
    constexpr int bytes = Q::kBytes * 1024 / Q::kElems;
    return bytes <= 1088 ? 1024 : 1024 * 1024 / bytes;
}

// The GEMV's work for one CTA (kWarps warps): out[r, f0 + f] for Rows rows of x
// and features f0 = blockIdx.x * kFeatures + 0..3 of W (n rows of k / kElems blocks).
template <class Q, int Rows>
__device__ __forceinline__ void gemv_tile(const float* __restrict__ x, int32_t k, bool x_aligned,
                                          const uint8_t* __restrict__ w, int32_t n, float* __restrict__ out) {
    constexpr int kTileElems = gemv_tile_elems<Q>();
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
    stage_tile(warp, 0);  // weights: before the wait (pdl.cuh), in flight while the kernels before finish
    pdl_wait();           // (moe_gemv_kernel, which reads the routing first, has waited already)
    int buf = 0;
    for (int t = warp; t < tiles; t += kWarps, buf ^= 1) {
        stage_tile(t + kWarps, buf ^ 1);
        cp_async_wait<1>();
        __syncwarp();
        const int units = min(kTileBlocks, blocks - t * kTileBlocks) * Q::kUnits;
#pragma unroll
        for (int j = 0; j < (kTileBlocks * Q::kUnits + 31) / 32; ++j) {
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
// owns features 16w..16w+15. The next stretch's units are in flight to
// registers and its activations to the other half of a double buffer
// (cp.async) while the tensor cores work on this one.
//
// Each CTA reads the activations of every row: the more features it owns, the
// less often they are read (64 rows of one stretch are 32 KB from L2 against
// 18 KB of Q4_K weights for 128 features). A 4096-feature matrix is then only
// 32 CTAs, a quarter of an H200's SMs, each walking all of k: such matrices
// split k over gridDim.y CTAs, which write partial sums that sum_splits_kernel
// adds in a fixed order (the result does not depend on which split finishes
// first).
//
// Above 32 rows the weight tile is double-buffered too. With one tile a
// stretch was two phases split by barriers, decode (ALU) then products (tensor
// cores), and with one CTA an SM (up to 250 registers a thread; 143 KB of
// shared memory at 64 rows) nothing ran beside either: ncu found the issue
// slots 25% busy. With two, each warp decodes the next stretch's units into the
// other tile between this stretch's products, one barrier a stretch. Up to 32
// rows one tile is kept: two CTAs of 128 registers fit an SM there, and a
// second tile would leave room for one.
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

// Weight tiles by activation tiles: the engine's choice (kernels/cuda/dev/quant_gemm.cu times both).
constexpr int qmm_weight_tiles(int m_tiles) { return m_tiles > 2 ? 2 : 1; }

// Dynamic shared memory of qmm_tile<Q, m_tiles, weight_tiles>.
inline size_t qmm_smem_bytes(int m_tiles, int weight_tiles) {
    return sizeof(__nv_bfloat16) * (weight_tiles * kQmmWLd * kQmmFeatures + kQmmLd * 2 * 16 * m_tiles);
}
// ... with the engine's tile count.
inline size_t quant_gemm_smem_bytes(int m_tiles) { return qmm_smem_bytes(m_tiles, qmm_weight_tiles(m_tiles)); }

// One CTA's work (kQmmThreads threads): out[r, f0 + 0..127] for rows r < rows
// <= 16 MT of x (bf16, rows of k), f0 = blockIdx.x * kQmmFeatures, over the
// stretches [first, last) of k. MT: 16-row tiles of activations; WTiles: weight
// tiles, 1 or 2 (qmm_smem_bytes(MT, WTiles) of dynamic shared memory).
template <class Q, int MT, int WTiles = qmm_weight_tiles(MT)>
__device__ __forceinline__ void qmm_tile(const __nv_bfloat16* __restrict__ x, int32_t rows, int32_t k,
                                         const uint8_t* __restrict__ w, int32_t n, int32_t first, int32_t last,
                                         float* __restrict__ out) {
    constexpr int kBlocks = kQmmK / Q::kElems;                                // per feature and stretch
    constexpr int kUnitsPerThread = kQmmFeatures * kBlocks * Q::kUnits / kQmmThreads;  // 4 or 8
    constexpr int kSteps = kQmmK / 16;                                        // m16n8k16 steps a stretch
    static_assert(WTiles == 1 || WTiles == 2, "one or two weight tiles");
    constexpr bool kTwoTiles = WTiles == 2;
    static_assert(kQmmFeatures == 16 * (kQmmThreads / 32), "a warp owns 16 features");
    static_assert(kSteps % kUnitsPerThread == 0, "a unit decoded every kSteps / kUnitsPerThread steps");
    constexpr int kXTile = 16 * MT * kQmmLd, kWTile = kQmmFeatures * kQmmWLd;
    using Unit = typename Q::Unit;
    extern __shared__ float4 qmm_smem4[];
    __nv_bfloat16* w_s = reinterpret_cast<__nv_bfloat16*>(qmm_smem4);  // [1 or 2][kQmmFeatures][kQmmWLd]
    __nv_bfloat16* x_s = w_s + WTiles * kWTile;                          // [2][16 MT][kQmmLd]
    const int32_t f0 = int32_t(blockIdx.x) * kQmmFeatures, blocks_per_row = k / Q::kElems;
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
    auto load_unit = [&](int j, int32_t stretch) {
        int f, b, u;
        unit_at(j, f, b, u);
        const int64_t feature = min(f0 + f, n - 1), block = min(stretch * kBlocks + b, blocks_per_row - 1);
        return Q::load(w + (feature * blocks_per_row + block) * Q::kBytes, u);
    };
    auto decode = [&](int j, const Unit& unit, __nv_bfloat16* tile) {
        int f, b, u;
        unit_at(j, f, b, u);
        const int col0 = b * Q::kElems;  // the block's first column in the tile
        decode_unit<Q>(unit, u, tile + f * kQmmWLd, [col0](int c) { return qmm_wcol(col0 + c); });
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
        cp_async_commit();
    };

    // The first stretch's weights are loaded before the wait (pdl.cuh): they
    // are in flight while the kernels before this one finish. (A caller that
    // reads what they wrote, as moe_mma_kernel does, has waited already.)
    Unit units[kUnitsPerThread];
#pragma unroll
    for (int j = 0; j < kUnitsPerThread; ++j) units[j] = load_unit(j, first);
    pdl_wait();
    load_x(0, first);
    if constexpr (kTwoTiles) {  // the first stretch's tile before the loop, then always one ahead
#pragma unroll
        for (int j = 0; j < kUnitsPerThread; ++j) {
            decode(j, units[j], w_s);
            if (first + 1 < last) units[j] = load_unit(j, first + 1);
        }
    }
    float acc[MT][2][4] = {};
    // ldmatrix row addresses (lane j: row j % 8 of matrix j / 8). A: rows x k,
    // matrices (rows 0-7, k 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15).
    // B: features x k, matrices (features 0-7, k 0-7), (0-7, 8-15), (8-15, 0-7), (8-15, 8-15).
    const int a_row = (lane & 7) + ((lane >> 3) & 1) * 8, a_col = (lane >> 4) * 8;
    const int b_row = (lane & 7) + (lane >> 4) * 8, b_col = ((lane >> 3) & 1) * 8;
    for (int32_t st = first; st < last; ++st) {
        const int stage = (st - first) & 1;
        const __nv_bfloat16* ws = w_s + (kTwoTiles ? stage * kWTile : 0);
        if constexpr (!kTwoTiles) {
            __syncthreads();  // every warp is done with the previous stretch's tile
#pragma unroll
            for (int j = 0; j < kUnitsPerThread; ++j) {
                decode(j, units[j], w_s);
                if (st + 1 < last) units[j] = load_unit(j, st + 1);  // in flight until the next stretch
            }
        }
        cp_async_wait<0>();  // this stretch's activations have landed
        // Every thread's activations landed and this stretch's tile decoded;
        // every warp done with the previous stretch's products, so the other
        // halves of the buffers are free.
        __syncthreads();
        if (st + 1 < last) load_x(stage ^ 1, st + 1);
        const __nv_bfloat16* xs = x_s + stage * kXTile;
#pragma unroll
        for (int step = 0; step < kSteps; ++step) {
            const int kk = 16 * step;
            uint32_t bf[4];
            ldmatrix_x4(bf, ws + (warp * 16 + b_row) * kQmmWLd + qmm_wcol(kk) + b_col);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                uint32_t af[4];
                ldmatrix_x4(af, xs + (mt * 16 + a_row) * kQmmLd + kk + a_col);
                mma_bf16(acc[mt][0], af, bf[0], bf[1]);
                mma_bf16(acc[mt][1], af, bf[2], bf[3]);
            }
            // Between the products, one of the next stretch's units into the
            // other tile, and the unit after it on its way from memory.
            constexpr int kEvery = kSteps / kUnitsPerThread;
            if constexpr (kTwoTiles) {
                if (step % kEvery == kEvery - 1 && st + 1 < last) {
                    const int j = step / kEvery;
                    decode(j, units[j], w_s + (stage ^ 1) * kWTile);
                    if (st + 2 < last) units[j] = load_unit(j, st + 2);
                }
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

}  // namespace minfer::cuda::tiles
