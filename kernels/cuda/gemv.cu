// The decode GEMV for dense weights: out[rows, n] = x[rows, k] * W^T for 1 to
// kGemvMaxRows rows, W in BF16, F16 or FP8 E4M3 (with its per-tensor scale),
// x and out in fp32. At these row counts a matmul is a stream of the weights
// and nothing else, so the kernel is built to keep HBM busy:
//  - a warp owns a few output features (Tiling); each lane loads 16-byte words
//    of each feature's row (8 bf16/f16 or 16 e4m3 weights) with a streaming
//    load that skips L1, several words per feature in flight;
//  - every activation it loads serves all the warp's features;
//  - weights widen in registers, accumulation is fp32, one warp reduction per
//    output at the end.
// The activations stay fp32: no conversion kernel runs before the GEMV (the
// cuBLASLt path converts them to bf16 first). One launch can serve up to
// kGemvMaxSegments matrices that share the input (q/k/v, gate/up): each block
// belongs to one of them, so a layer's projections cost one launch, not three.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <stdexcept>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/gemv_common.cuh"
#include "kernels/cuda/load_stream.cuh"
#include "kernels/cuda/pdl.cuh"

namespace minfer::cuda {

namespace {

constexpr int kWarps = 4;

// How a 16-byte word of each weight format widens to floats.
struct Bf16Format {
    static constexpr int kPerWord = 8;
    __device__ static void widen(const uint4 v, float* f) {
        const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {  // bf16 -> f32 is a 16-bit shift
            f[2 * i] = __uint_as_float(words[i] << 16);
            f[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
        }
    }
};
struct F16Format {
    static constexpr int kPerWord = 8;
    __device__ static void widen(const uint4 v, float* f) {
        const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float2 ff = __half22float2(*reinterpret_cast<const __half2*>(&words[i]));
            f[2 * i] = ff.x;
            f[2 * i + 1] = ff.y;
        }
    }
};
struct E4m3Format {  // exact, through the hardware e4m3x2 -> half2 conversion
    static constexpr int kPerWord = 16;
    __device__ static void widen(const uint4 v, float* f) {
        const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const auto pair = __nv_fp8x2_storage_t((words[i] >> (16 * h)) & 0xffffu);
                const float2 ff = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3)));
                f[4 * i + 2 * h] = ff.x;
                f[4 * i + 2 * h + 1] = ff.y;
            }
    }
};

// E activations starting at column c of a row of k: 16-byte loads when the row
// allows them, zeros past k (the weights' padding columns are zeros too, but an
// activation read past the row could be a NaN).
template <int E>
__device__ __forceinline__ void load_x(const float* row, int32_t c, int32_t k, bool vec, float* v) {
    if (vec && c + E <= k) {
#pragma unroll
        for (int i = 0; i < E / 4; ++i) {
            const float4 f = __ldg(reinterpret_cast<const float4*>(row + c) + i);
            v[4 * i] = f.x, v[4 * i + 1] = f.y, v[4 * i + 2] = f.z, v[4 * i + 3] = f.w;
        }
    } else {
#pragma unroll
        for (int i = 0; i < E; ++i) v[i] = c + i < k ? __ldg(row + c + i) : 0.0f;
    }
}

// vec: x and its rows are 16-byte aligned.
// Features per warp and words per feature in flight, by row count: every
// activation a lane loads serves the warp's features, so more rows want more
// features per warp (the activations, read from L1/L2 by every warp, are what
// limits 8 rows at 2 features). At one row, minfer_gpu_ops --bench's sweep of
// 8 tilings over Llama-3-8B's shapes chose 2 features x 2 words for bf16:
// within 2% of the best tiling on every shape (q/o 73.8% of HBM bandwidth, q/k/v
// as one 84.4%, gate/up 92.5%, down 92.6%), where 2 x 4 gave 69-90%. At two
// rows FP8 keeps 4 words a feature in flight.
//
// FP8 at one row is the exception: a row of 4,096 weights is only 256 words,
// so at 2 x 4 a warp that waits for each stretch spends its short life on two
// round trips to memory. The sweep (minfer_gpu_ops --bench-gemv, one H200) chose 4
// features x 1 word with the next stretch prefetched: q/o 9.6 -> 7.8 µs,
// q/k/v 16.8 -> 9.1, gate+up 44.7 -> 34.8, down 24.8 -> 21.7 against 2 x 4
// without, and within 5% of the best tiling on each shape.
template <class Format, int Rows>
struct Tiling {
    static constexpr int features() { return Rows == 1 && Format::kPerWord == 16 ? 4 : Rows <= 2 ? 2 : 4; }
    static constexpr int unroll() { return Format::kPerWord == 16 ? (Rows == 1 ? 1 : Rows == 2 ? 4 : 2) : 2; }
    static constexpr bool prefetch() { return Rows == 1 && Format::kPerWord == 16; }
};

// One stretch of a warp's walk along its rows: kUnroll words a feature, word c
// of each row for a lane at column word c0 + lane (zeros past the row's end).
template <int kFeatures, int kUnroll>
__device__ __forceinline__ void load_stretch(const uint4* const (&rows)[kFeatures], int c0, int32_t words,
                                             uint4 (&wv)[kUnroll][kFeatures]) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int f = 0; f < kFeatures; ++f)
            wv[u][f] = c0 + 32 * u < words ? load_stream(rows[f] + c0 + 32 * u) : make_uint4(0, 0, 0, 0);
}

// kPrefetch: issue the next stretch's loads before using this one's, so a warp
// always has loads in flight (an FP8 row of 4,096 weights is only 256 words:
// two stretches of 4 words a lane, each a full round trip to memory otherwise).
template <class Format, int Rows, int kFeatures = Tiling<Format, Rows>::features(),
          int kUnroll = Tiling<Format, Rows>::unroll(), bool kPrefetch = Tiling<Format, Rows>::prefetch()>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_kernel(const float* __restrict__ x, int32_t k, bool vec, const __grid_constant__ GemvSegments segs,
                int32_t words) {
    constexpr int E = Format::kPerWord;
    const int seg = gemv_segment(segs);
    const uint4* __restrict__ w = segs.w[seg];
    float* __restrict__ out = segs.out[seg];
    const int32_t n = segs.n[seg];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int f0 = ((int32_t(blockIdx.x) - segs.first_block[seg]) * kWarps + warp) * kFeatures;
    const uint4* rows[kFeatures];
#pragma unroll
    for (int f = 0; f < kFeatures; ++f) rows[f] = w + size_t(min(f0 + f, n - 1)) * size_t(words);

    // The first stretch of weights is loaded before the wait (pdl.cuh): it is
    // in flight while the kernels before this one finish.
    uint4 wv[kUnroll][kFeatures];
    if (f0 < n) load_stretch(rows, lane, words, wv);
    pdl_wait();
    if (f0 >= n) return;  // the whole warp

    float acc[Rows][kFeatures] = {};

    for (int c0 = lane; c0 < words; c0 += 32 * kUnroll) {
        // Issue every load of this stretch (or, prefetching, of the next) before using any.
        uint4 next[kUnroll][kFeatures];
        if constexpr (kPrefetch)
            load_stretch(rows, c0 + 32 * kUnroll, words, next);
        else if (c0 != lane)  // the first stretch is loaded above
            load_stretch(rows, c0, words, wv);
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const int c = c0 + 32 * u;
            if (c >= words) break;
            float wf[kFeatures][E];
#pragma unroll
            for (int f = 0; f < kFeatures; ++f) Format::widen(wv[u][f], wf[f]);
#pragma unroll
            for (int r = 0; r < Rows; ++r) {
                float xv[E];
                load_x<E>(x + size_t(r) * k, c * E, k, vec, xv);
#pragma unroll
                for (int f = 0; f < kFeatures; ++f)
#pragma unroll
                    for (int j = 0; j < E; ++j) acc[r][f] = fmaf(wf[f][j], xv[j], acc[r][f]);
            }
        }
        if constexpr (kPrefetch)
#pragma unroll
            for (int u = 0; u < kUnroll; ++u)
#pragma unroll
                for (int f = 0; f < kFeatures; ++f) wv[u][f] = next[u][f];
    }

    store_warp_sums(acc, lane, f0, n, segs.scale[seg] ? *segs.scale[seg] : 1.0f, out);
}

template <class Format, int Rows, int Features = Tiling<Format, Rows>::features(),
          int Unroll = Tiling<Format, Rows>::unroll(), bool Prefetch = Tiling<Format, Rows>::prefetch()>
void gemv(const float* x, int32_t k, const GemvTarget* targets, int32_t count, int32_t words, const float* const* scales,
          cudaStream_t stream) {
    const bool vec = is_aligned(x, 16) && k % 4 == 0;
    int32_t blocks = 0;
    const GemvSegments segs = gemv_segments(targets, count, scales, kWarps * Features, blocks);
    launch_pdl(gemv_kernel<Format, Rows, Features, Unroll, Prefetch>, unsigned(blocks), kWarps * 32, 0, stream, x, k, vec, segs,
               words);
}

// One instantiation per row count, so that the accumulators stay in registers.
template <class Format>
void gemv_rows(const float* x, int32_t rows, int32_t k, const GemvTarget* targets, int32_t count, int32_t words,
               const float* const* scales, cudaStream_t stream) {
    switch (rows) {
        case 1: gemv<Format, 1>(x, k, targets, count, words, scales, stream); break;
        case 2: gemv<Format, 2>(x, k, targets, count, words, scales, stream); break;
        case 3: gemv<Format, 3>(x, k, targets, count, words, scales, stream); break;
        case 4: gemv<Format, 4>(x, k, targets, count, words, scales, stream); break;
        case 5: gemv<Format, 5>(x, k, targets, count, words, scales, stream); break;
        case 6: gemv<Format, 6>(x, k, targets, count, words, scales, stream); break;
        case 7: gemv<Format, 7>(x, k, targets, count, words, scales, stream); break;
        case 8: gemv<Format, 8>(x, k, targets, count, words, scales, stream); break;
        default: throw std::invalid_argument("gemv: rows must be in 1..kGemvMaxRows");
    }
}

}  // namespace

void launch_dense_gemv_group(const float* x, int32_t rows, int32_t k, const GemvTarget* targets, int32_t count,
                             DType type, int64_t ldw, cudaStream_t stream) {
    if (rows == 0 || count == 0) return;
    if (count > kGemvMaxSegments) throw std::invalid_argument("gemv: at most kGemvMaxSegments matrices a launch");
    if (ldw % 8 || ldw < k) throw std::invalid_argument("gemv: weight rows must be padded to 16 bytes");
    for (int32_t i = 0; i < count; ++i)
        if (targets[i].n <= 0) throw std::invalid_argument("gemv: every matrix needs rows");
    const int32_t words = int32_t(ldw / 8);
    switch (type) {
        case DType::BF16: gemv_rows<Bf16Format>(x, rows, k, targets, count, words, nullptr, stream); break;
        case DType::F16: gemv_rows<F16Format>(x, rows, k, targets, count, words, nullptr, stream); break;
        default: throw std::invalid_argument("gemv: dense weights must be F16 or BF16");
    }
}

// The bench's sweeps: BF16 GEMVs of 1 to 5 rows with other tilings than Tiling's.
template <int Rows, int Features, int Unroll, bool Prefetch = false>
void bf16_gemv_variant(const float* x, int32_t k, const GemvTarget& target, int32_t words, cudaStream_t stream) {
    gemv<Bf16Format, Rows, Features, Unroll, Prefetch>(x, k, &target, 1, words, nullptr, stream);
}

bool launch_bf16_gemv_variant(int rows, int features, int unroll, bool prefetch, const float* x, int32_t k,
                              const void* w, int64_t ldw, int32_t n, float* out, cudaStream_t stream) {
    const GemvTarget target{w, n, out};
    const int32_t words = int32_t(ldw / 8);
    switch (int(prefetch) * 100000 + rows * 1000 + features * 10 + unroll) {
        case 101012: bf16_gemv_variant<1, 1, 2, true>(x, k, target, words, stream); return true;
        case 101021: bf16_gemv_variant<1, 2, 1, true>(x, k, target, words, stream); return true;
        case 101022: bf16_gemv_variant<1, 2, 2, true>(x, k, target, words, stream); return true;
        case 101041: bf16_gemv_variant<1, 4, 1, true>(x, k, target, words, stream); return true;
        case 1012: bf16_gemv_variant<1, 1, 2>(x, k, target, words, stream); return true;
        case 1014: bf16_gemv_variant<1, 1, 4>(x, k, target, words, stream); return true;
        case 1018: bf16_gemv_variant<1, 1, 8>(x, k, target, words, stream); return true;
        case 1022: bf16_gemv_variant<1, 2, 2>(x, k, target, words, stream); return true;
        case 1024: bf16_gemv_variant<1, 2, 4>(x, k, target, words, stream); return true;
        case 1028: bf16_gemv_variant<1, 2, 8>(x, k, target, words, stream); return true;
        case 1042: bf16_gemv_variant<1, 4, 2>(x, k, target, words, stream); return true;
        case 1044: bf16_gemv_variant<1, 4, 4>(x, k, target, words, stream); return true;
#define MINFER_GEMV_ROWS_VARIANTS(R)                                                              \
    case R * 1000 + 22: bf16_gemv_variant<R, 2, 2>(x, k, target, words, stream); return true; \
    case R * 1000 + 41: bf16_gemv_variant<R, 4, 1>(x, k, target, words, stream); return true; \
    case R * 1000 + 42: bf16_gemv_variant<R, 4, 2>(x, k, target, words, stream); return true; \
    case R * 1000 + 81: bf16_gemv_variant<R, 8, 1>(x, k, target, words, stream); return true;
        MINFER_GEMV_ROWS_VARIANTS(2)
        MINFER_GEMV_ROWS_VARIANTS(3)
        MINFER_GEMV_ROWS_VARIANTS(4)
        MINFER_GEMV_ROWS_VARIANTS(5)
#undef MINFER_GEMV_ROWS_VARIANTS
        default: return false;
    }
}

// The bench's sweep of one-row FP8 tilings, with and without prefetching.
bool launch_fp8_gemv_variant(int features, int unroll, bool prefetch, const float* x, int32_t k, const uint8_t* w8,
                             const float* scale, int32_t n, float* out, cudaStream_t stream) {
    const GemvTarget target{w8, n, out};
    const int32_t words = k / 16;
#define MINFER_FP8_VARIANT(F, U, P)                                                        \
    case F * 100 + U * 10 + P:                                                             \
        gemv<E4m3Format, 1, F, U, bool(P)>(x, k, &target, 1, words, &scale, stream); \
        return true;
    switch (features * 100 + unroll * 10 + int(prefetch)) {
        MINFER_FP8_VARIANT(1, 8, 0)
        MINFER_FP8_VARIANT(2, 2, 0)
        MINFER_FP8_VARIANT(2, 4, 0)
        MINFER_FP8_VARIANT(4, 2, 0)
        MINFER_FP8_VARIANT(4, 4, 0)
        MINFER_FP8_VARIANT(8, 1, 0)
        MINFER_FP8_VARIANT(8, 2, 0)
        MINFER_FP8_VARIANT(1, 4, 1)
        MINFER_FP8_VARIANT(2, 2, 1)
        MINFER_FP8_VARIANT(2, 4, 1)
        MINFER_FP8_VARIANT(4, 1, 1)
        MINFER_FP8_VARIANT(4, 2, 1)
        MINFER_FP8_VARIANT(8, 1, 1)
#undef MINFER_FP8_VARIANT
        default: return false;
    }
}

void launch_dense_gemv(const float* x, int32_t rows, int32_t k, const void* w, DType type, int64_t ldw, int32_t n,
                       float* out, cudaStream_t stream) {
    if (rows == 0 || n == 0) return;
    const GemvTarget target{w, n, out};
    launch_dense_gemv_group(x, rows, k, &target, 1, type, ldw, stream);
}

void launch_fp8_gemv_group(const float* x, int32_t rows, int32_t k, const GemvTarget* targets, const float* const* scales,
                           int32_t count, cudaStream_t stream) {
    if (rows == 0 || count == 0) return;
    if (count > kGemvMaxSegments) throw std::invalid_argument("fp8 gemv: at most kGemvMaxSegments matrices a launch");
    if (k % 16) throw std::invalid_argument("fp8 gemv: k must be a multiple of 16");
    for (int32_t i = 0; i < count; ++i)
        if (targets[i].n <= 0 || !scales[i]) throw std::invalid_argument("fp8 gemv: every matrix needs rows and a scale");
    gemv_rows<E4m3Format>(x, rows, k, targets, count, k / 16, scales, stream);
}

void launch_fp8_gemv(const float* x, int32_t rows, int32_t k, const uint8_t* w8, const float* scale, int32_t n,
                     float* out, cudaStream_t stream) {
    if (rows == 0 || n == 0) return;
    const GemvTarget target{w8, n, out};
    launch_fp8_gemv_group(x, rows, k, &target, &scale, 1, stream);
}

}  // namespace minfer::cuda
