// Chapter 2.2's matrix-multiplication ladder, in the manner of Simon Boehm's
// worklog: C = A * B with A (M x K) and B (K x N) bf16, row-major, and C
// (M x N) fp32, accumulated in fp32. Each version adds one idea to the one
// before it; each is checked against a double-precision CPU dot product on
// 4,096 randomly sampled outputs of fresh random inputs, then timed (median of
// N launches after warm-up) and reported in TFLOP/s and as a fraction of the
// 749 TFLOP/s bf16 cuBLASLt reached on our H200. cuBLASLt itself runs last, on
// the same inputs, as the reference line.
//
//   minfer_ladder_matmul [--size S | --m M --n N --k K] [--runs R] [--only v1..v6|cublaslt]
//
// M and N must be multiples of 128 and K of 32 (the tile sizes below; the
// kernels keep no edge code, so that each shows its one idea plainly).
//
// Not here: a Hopper wgmma/TMA version (the step cuBLASLt's own kernels take);
// chapter 2.2's page explains what it would add.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/ladder/common.cuh"
#include "kernels/cuda/mma.cuh"

using namespace ladder;
using bf16 = __nv_bfloat16;

#define CUBLAS_CHECK(call) MINFER_CHECK_STATUS(call, CUBLAS_STATUS_SUCCESS, cublasLtGetStatusString)

// ============================================================================
// v1 naive: one thread an output, threadIdx.x walking down a column of C.
// The 32 lanes of a warp read 32 rows of A, K elements apart: 32 separate
// sectors a load, almost none of each used. Every thread also rereads its whole
// row of A and column of B from memory (caches aside): 2K loads for 2K FLOPs.
// ============================================================================
__global__ void matmul_naive(const bf16* A, const bf16* B, float* C, int M, int N, int K) {
    const int m = blockIdx.x * 32 + threadIdx.x;
    const int n = blockIdx.y * 32 + threadIdx.y;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += __bfloat162float(A[int64_t(m) * K + k]) * __bfloat162float(B[int64_t(k) * N + n]);
    C[int64_t(m) * N + n] = acc;
}

// ============================================================================
// v2 coalesced: the same arithmetic, threads renumbered so that consecutive
// lanes take consecutive columns n. Now a warp's loads of B are one contiguous
// 64-byte row piece, its loads of A one broadcast address, and its stores of C
// one contiguous 128 bytes. Nothing else changed.
// ============================================================================
__global__ void matmul_coalesced(const bf16* A, const bf16* B, float* C, int M, int N, int K) {
    const int m = blockIdx.x * 32 + threadIdx.x / 32;
    const int n = blockIdx.y * 32 + threadIdx.x % 32;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += __bfloat162float(A[int64_t(m) * K + k]) * __bfloat162float(B[int64_t(k) * N + n]);
    C[int64_t(m) * N + n] = acc;
}

// ============================================================================
// v3 shared-memory tiles: a block of 32x32 threads computes a 32x32 tile of C.
// It walks K in steps of 32, each step loading a 32x32 tile of A and of B into
// shared memory once (each thread one element of each, coalesced) and then
// reading each element 32 times from there. Global traffic falls 32-fold; now
// the shared-memory loads, two per FMA, are the limit.
// ============================================================================
constexpr int kT3 = 32;
__global__ void matmul_smem_tiles(const bf16* A, const bf16* B, float* C, int M, int N, int K) {
    __shared__ float As[kT3][kT3];
    __shared__ float Bs[kT3][kT3];
    const int ty = threadIdx.x / kT3, tx = threadIdx.x % kT3;
    const int m = blockIdx.x * kT3 + ty, n = blockIdx.y * kT3 + tx;
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += kT3) {
        As[ty][tx] = __bfloat162float(A[int64_t(m) * K + k0 + tx]);
        Bs[ty][tx] = __bfloat162float(B[int64_t(k0 + ty) * N + n]);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kT3; ++k) acc += As[ty][k] * Bs[k][tx];  // As[ty][k]: a broadcast; Bs[k][tx]: 32 banks
        __syncthreads();  // nobody overwrites the tiles while others still read them
    }
    C[int64_t(m) * N + n] = acc;
}

// ============================================================================
// v4 1D register tiles: each thread computes TM = 8 outputs of one column.
// In the inner loop one value of B (loaded once into a register) meets 8 values
// of A: 9 shared loads for 8 FMAs instead of 16. Block tile 64x64, K step 8,
// 512 threads.
// ============================================================================
constexpr int kBM4 = 64, kBN4 = 64, kBK4 = 8, kTM4 = 8;
__global__ void __launch_bounds__(kBM4 * kBN4 / kTM4)
    matmul_reg_tiles_1d(const bf16* A, const bf16* B, float* C, int M, int N, int K) {
    __shared__ float As[kBM4][kBK4];
    __shared__ float Bs[kBK4][kBN4];
    const int tid = threadIdx.x;
    const int bm = blockIdx.y * kBM4, bn = blockIdx.x * kBN4;
    const int a_row = tid / kBK4, a_col = tid % kBK4;  // 64x8 tile of A: one element a thread
    const int b_row = tid / kBN4, b_col = tid % kBN4;  // 8x64 tile of B: one element a thread
    const int t_row = tid / kBN4, t_col = tid % kBN4;  // this thread's outputs: rows t_row*8 .. +7, column t_col
    float acc[kTM4] = {};
    for (int k0 = 0; k0 < K; k0 += kBK4) {
        As[a_row][a_col] = __bfloat162float(A[int64_t(bm + a_row) * K + k0 + a_col]);
        Bs[b_row][b_col] = __bfloat162float(B[int64_t(k0 + b_row) * N + bn + b_col]);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kBK4; ++k) {
            const float b = Bs[k][t_col];
#pragma unroll
            for (int i = 0; i < kTM4; ++i) acc[i] += As[t_row * kTM4 + i][k] * b;
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < kTM4; ++i) C[int64_t(bm + t_row * kTM4 + i) * N + bn + t_col] = acc[i];
}

// ============================================================================
// v5 2D register tiles with vectorized loads: each thread computes an 8x8
// block of C as an outer product of 8 values of A and 8 of B per k: 16 shared
// loads (four float4s) for 64 FMAs. Block tile 128x128, K step 16, 256
// threads. Global loads are 16 bytes (8 bf16) a thread; A's tile is stored
// transposed (As[k][m]) so a thread's 8 values of A for one k are contiguous.
// ============================================================================
constexpr int kBM5 = 128, kBN5 = 128, kBK5 = 16, kTM5 = 8, kTN5 = 8;
constexpr int kThreads5 = (kBM5 / kTM5) * (kBN5 / kTN5);  // 256
__global__ void __launch_bounds__(kThreads5)
    matmul_reg_tiles_2d(const bf16* A, const bf16* B, float* C, int M, int N, int K) {
    __shared__ __align__(16) float As[kBK5][kBM5];
    __shared__ __align__(16) float Bs[kBK5][kBN5];
    const int tid = threadIdx.x;
    const int bm = blockIdx.y * kBM5, bn = blockIdx.x * kBN5;
    // 128x16 of A = 256 pieces of 8 bf16: row tid/2, columns (tid%2)*8 .. +7.
    const int a_row = tid / 2, a_col = (tid % 2) * 8;
    // 16x128 of B = 256 pieces of 8: row tid/16, columns (tid%16)*8 .. +7.
    const int b_row = tid / 16, b_col = (tid % 16) * 8;
    const int t_row = tid / (kBN5 / kTN5), t_col = tid % (kBN5 / kTN5);
    float acc[kTM5][kTN5] = {};
    float ra[kTM5], rb[kTN5];
    for (int k0 = 0; k0 < K; k0 += kBK5) {
        const uint4 av = *reinterpret_cast<const uint4*>(A + int64_t(bm + a_row) * K + k0 + a_col);
        const uint4 bv = *reinterpret_cast<const uint4*>(B + int64_t(k0 + b_row) * N + bn + b_col);
        const bf16* a8 = reinterpret_cast<const bf16*>(&av);
        const bf16* b8 = reinterpret_cast<const bf16*>(&bv);
#pragma unroll
        for (int i = 0; i < 8; ++i) As[a_col + i][a_row] = __bfloat162float(a8[i]);
        *reinterpret_cast<float4*>(&Bs[b_row][b_col]) =
            make_float4(__bfloat162float(b8[0]), __bfloat162float(b8[1]), __bfloat162float(b8[2]), __bfloat162float(b8[3]));
        *reinterpret_cast<float4*>(&Bs[b_row][b_col + 4]) =
            make_float4(__bfloat162float(b8[4]), __bfloat162float(b8[5]), __bfloat162float(b8[6]), __bfloat162float(b8[7]));
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kBK5; ++k) {
            *reinterpret_cast<float4*>(&ra[0]) = *reinterpret_cast<const float4*>(&As[k][t_row * kTM5]);
            *reinterpret_cast<float4*>(&ra[4]) = *reinterpret_cast<const float4*>(&As[k][t_row * kTM5 + 4]);
            *reinterpret_cast<float4*>(&rb[0]) = *reinterpret_cast<const float4*>(&Bs[k][t_col * kTN5]);
            *reinterpret_cast<float4*>(&rb[4]) = *reinterpret_cast<const float4*>(&Bs[k][t_col * kTN5 + 4]);
#pragma unroll
            for (int i = 0; i < kTM5; ++i)
#pragma unroll
                for (int j = 0; j < kTN5; ++j) acc[i][j] += ra[i] * rb[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < kTM5; ++i) {
        float* c = C + int64_t(bm + t_row * kTM5 + i) * N + bn + t_col * kTN5;
        *reinterpret_cast<float4*>(c) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
        *reinterpret_cast<float4*>(c + 4) = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
    }
}

// ============================================================================
// v6 tensor cores: mma.sync m16n8k16 (bf16 in, fp32 accumulate) does a 16x8x16
// product for a whole warp in one instruction. Block tile 128x128, K step 32,
// 8 warps as 2 (M) x 4 (N), each warp 64x32 of C = 4 x 4 mma tiles (64 fp32
// accumulators a thread). Tiles stay bf16 in shared memory; ldmatrix hands
// each lane its fragment (A as stored, B transposed on the fly, .trans); the
// next K tile streams in with cp.async while this one is multiplied (two
// stages). Rows are padded by 8 bf16 (16 bytes) so that the 8 row addresses
// of one ldmatrix land in 8 different 4-bank groups: no bank conflicts.
// ============================================================================
constexpr int kBM6 = 128, kBN6 = 128, kBK6 = 32, kPad6 = 8;
constexpr int kThreads6 = 256;
struct Smem6 {
    bf16 a[2][kBM6][kBK6 + kPad6];  // 2 x 128 x 40 x 2 B = 20,480 B
    bf16 b[2][kBK6][kBN6 + kPad6];  // 2 x  32 x 136 x 2 B = 17,408 B
};

// Issue one K tile's copies (A: 512 pieces of 16 bytes, B: 512), two of each a thread.
__device__ __forceinline__ void load_tile6(Smem6& s, int stage, const bf16* A, const bf16* B, int bm, int bn, int k0,
                                           int N, int K) {
    const int tid = threadIdx.x;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int c = tid + i * kThreads6;
        const int ar = c / (kBK6 / 8), ac = (c % (kBK6 / 8)) * 8;  // 4 pieces a row of A's tile
        minfer::cuda::cp_async16(&s.a[stage][ar][ac], A + int64_t(bm + ar) * K + k0 + ac);
        const int br = c / (kBN6 / 8), bc = (c % (kBN6 / 8)) * 8;  // 16 pieces a row of B's tile
        minfer::cuda::cp_async16(&s.b[stage][br][bc], B + int64_t(k0 + br) * N + bn + bc);
    }
}

__global__ void __launch_bounds__(kThreads6)
    matmul_mma_sync(const bf16* A, const bf16* B, float* C, int M, int N, int K) {
    __shared__ __align__(128) Smem6 s;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = (warp / 4) * 64, wn = (warp % 4) * 32;  // this warp's 64x32 corner of the block tile
    const int bm = blockIdx.y * kBM6, bn = blockIdx.x * kBN6;
    float acc[4][4][4] = {};  // [m16 tile][n8 tile][fragment]
    const int tiles = K / kBK6;

    load_tile6(s, 0, A, B, bm, bn, 0, N, K);
    minfer::cuda::cp_async_commit();
    for (int t = 0; t < tiles; ++t) {
        const int cur = t & 1;
        if (t + 1 < tiles) {  // the next tile's copies run while this one is multiplied
            load_tile6(s, cur ^ 1, A, B, bm, bn, (t + 1) * kBK6, N, K);
            minfer::cuda::cp_async_commit();
            minfer::cuda::cp_async_wait<1>();  // all but the newest group landed: tile t is here
        } else {
            minfer::cuda::cp_async_wait<0>();
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kBK6; kk += 16) {
            uint32_t af[4][4], bfr[4][2];
            // A fragment (16x16): lanes 0-15 give rows 0-15 at column kk, lanes 16-31 the same rows at kk + 8.
#pragma unroll
            for (int i = 0; i < 4; ++i)
                minfer::cuda::ldmatrix_x4(af[i], &s.a[cur][wm + i * 16 + lane % 16][kk + (lane / 16) * 8]);
            // B fragments (16x8, "col"): B is stored [k][n], so ldmatrix .trans. One x4 covers
            // k 0-15 of two n8 tiles: lanes 0-7 k 0-7, 8-15 k 8-15 (tile j), 16-31 the same for tile j+1.
#pragma unroll
            for (int j = 0; j < 4; j += 2) {
                uint32_t r[4];
                minfer::cuda::ldmatrix_x4_trans(r, &s.b[cur][kk + lane % 16][wn + j * 8 + (lane / 16) * 8]);
                bfr[j][0] = r[0], bfr[j][1] = r[1], bfr[j + 1][0] = r[2], bfr[j + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) minfer::cuda::mma_bf16(acc[i][j], af[i], bfr[j][0], bfr[j][1]);
        }
        __syncthreads();  // the stage just read is the one the next iteration's copies overwrite
    }
    // Accumulator layout of m16n8: c0,c1 at row lane/4, columns (lane%4)*2, +1; c2,c3 eight rows below.
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int row = bm + wm + i * 16 + lane / 4, col = bn + wn + j * 8 + (lane % 4) * 2;
            *reinterpret_cast<float2*>(C + int64_t(row) * N + col) = make_float2(acc[i][j][0], acc[i][j][1]);
            *reinterpret_cast<float2*>(C + int64_t(row + 8) * N + col) = make_float2(acc[i][j][2], acc[i][j][3]);
        }
}

// ============================================================================
// cuBLASLt, the reference line. cuBLASLt is column-major; a row-major C = A B
// is the column-major C^T = B^T A^T, so B goes in first, unchanged.
// ============================================================================
struct Cublas {
    cublasLtHandle_t lt = nullptr;
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
    cublasLtMatmulAlgo_t algo{};
    void* ws = nullptr;
    size_t ws_bytes = size_t(64) << 20;

    Cublas(int M, int N, int K) {
        CUBLAS_CHECK(cublasLtCreate(&lt));
        CUDA_CHECK(cudaMalloc(&ws, ws_bytes));
        CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        // Column-major views: B^T is N x K (ld N), A^T is K x M (ld K), C^T is N x M (ld N).
        CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, N, K, N));
        CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, K, M, K));
        CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, N, M, N));
        cublasLtMatmulPreference_t pref = nullptr;
        CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                                          sizeof(ws_bytes)));
        cublasLtMatmulHeuristicResult_t result{};
        int found = 0;
        CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, lb, la, lc, lc, pref, 1, &result, &found));
        cublasLtMatmulPreferenceDestroy(pref);
        if (found == 0) throw std::runtime_error("cuBLASLt found no algorithm");
        algo = result.algo;
    }
    ~Cublas() {
        cublasLtMatrixLayoutDestroy(la);
        cublasLtMatrixLayoutDestroy(lb);
        cublasLtMatrixLayoutDestroy(lc);
        cublasLtMatmulDescDestroy(desc);
        cublasLtDestroy(lt);
        cudaFree(ws);
    }
    void run(const bf16* A, const bf16* B, float* C) {
        const float alpha = 1.f, beta = 0.f;
        CUBLAS_CHECK(cublasLtMatmul(lt, desc, &alpha, B, lb, A, la, &beta, C, lc, C, lc, &algo, ws, ws_bytes, 0));
    }
};

// ============================================================================
// The harness.
// ============================================================================
struct Sample {
    int m, n;
    double ref;
};

int main(int argc, char** argv) {
    int M = 4096, N = 4096, K = 4096, runs = 10;
    std::string only;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool has = i + 1 < argc;
        if (a == "--size" && has) M = N = K = std::atoi(argv[++i]);
        else if (a == "--m" && has) M = std::atoi(argv[++i]);
        else if (a == "--n" && has) N = std::atoi(argv[++i]);
        else if (a == "--k" && has) K = std::atoi(argv[++i]);
        else if (a == "--runs" && has) runs = std::atoi(argv[++i]);
        else if (a == "--only" && has) only = argv[++i];
        else {
            std::fprintf(stderr, "usage: %s [--size S | --m M --n N --k K] [--runs R] [--only v1..v6|cublaslt]\n", argv[0]);
            return 2;
        }
    }
    const bool known = only.empty() || only == "cublaslt" || (only.size() == 2 && only[0] == 'v' && only[1] >= '1' && only[1] <= '6');
    if (!known || runs <= 0) {
        std::fprintf(stderr, "--only takes v1 to v6 or cublaslt, and --runs a positive count\n");
        return 2;
    }
    if (M <= 0 || N <= 0 || K <= 0 || M % 128 || N % 128 || K % 32) {
        std::fprintf(stderr, "M and N must be positive multiples of 128, K of 32 (got %d %d %d)\n", M, N, K);
        return 2;
    }
    try {
        print_device();
        const double flops = 2.0 * M * N * K;
        std::printf("C[%d x %d] fp32 = A[%d x %d] bf16 * B[%d x %d] bf16; %.1f GFLOP a product; median of %d after 3 warm-up\n",
                    M, N, M, K, K, N, flops / 1e9, runs);

        // Random bf16 inputs; the CPU keeps the rounded values so the reference sees exactly what the GPU sees.
        std::vector<bf16> ha(size_t(M) * K), hb(size_t(K) * N);
        std::vector<float> fa(ha.size()), fb(hb.size());
        std::mt19937 gen(42);
        std::uniform_real_distribution<float> dist(-1.f, 1.f);
        for (size_t i = 0; i < ha.size(); ++i) ha[i] = __float2bfloat16(dist(gen)), fa[i] = __bfloat162float(ha[i]);
        for (size_t i = 0; i < hb.size(); ++i) hb[i] = __float2bfloat16(dist(gen)), fb[i] = __bfloat162float(hb[i]);

        // 4,096 sampled outputs against a double-precision dot product: K multiply-adds each,
        // a fraction of a second on the CPU where the full product would take minutes.
        std::vector<Sample> samples(4096);
        std::uniform_int_distribution<int> pick_m(0, M - 1), pick_n(0, N - 1);
        for (Sample& s : samples) {
            s.m = pick_m(gen), s.n = pick_n(gen);
            double acc = 0;
            for (int k = 0; k < K; ++k) acc += double(fa[size_t(s.m) * K + k]) * double(fb[size_t(k) * N + s.n]);
            s.ref = acc;
        }

        DeviceArray<bf16> A(ha.size()), B(hb.size());
        DeviceArray<float> C(size_t(M) * N);
        A.upload(ha);
        B.upload(hb);

        bool all_ok = true;
        auto check = [&](const char* name, auto launch) {
            if (!only.empty() && std::strncmp(name, only.c_str(), only.size()) != 0) return;
            CUDA_CHECK(cudaMemset(C.p, 0, C.n * sizeof(float)));  // a version that writes nothing cannot pass
            launch();
            CUDA_CHECK_LAUNCH();
            CUDA_CHECK(cudaDeviceSynchronize());
            const std::vector<float> hc = C.download();
            double num = 0, den = 0;
            for (const Sample& s : samples) {
                const double d = double(hc[size_t(s.m) * N + s.n]) - s.ref;
                num += d * d, den += s.ref * s.ref;
            }
            const double err = std::sqrt(num / den);
            const bool ok = err <= 1e-3;  // fp32 accumulation over K of exact bf16 products: ~1e-6
            all_ok &= ok;
            const float ms = median_ms(launch, runs);
            const double tflops = flops / (ms * 1e-3) / 1e12;
            std::printf("%-34s rel_err %.2e %s  %9.3f ms  %7.1f TFLOP/s  %5.1f%% of %.0f\n", name, err,
                        ok ? "PASS" : "FAIL", ms, tflops, 100.0 * tflops / kBf16TFlops, kBf16TFlops);
        };

        check("v1 naive", [&] { matmul_naive<<<dim3(M / 32, N / 32), dim3(32, 32)>>>(A.p, B.p, C.p, M, N, K); });
        check("v2 coalesced", [&] { matmul_coalesced<<<dim3(M / 32, N / 32), 1024>>>(A.p, B.p, C.p, M, N, K); });
        check("v3 shared-memory tiles", [&] { matmul_smem_tiles<<<dim3(M / kT3, N / kT3), kT3 * kT3>>>(A.p, B.p, C.p, M, N, K); });
        check("v4 1D register tiles", [&] {
            matmul_reg_tiles_1d<<<dim3(N / kBN4, M / kBM4), kBM4 * kBN4 / kTM4>>>(A.p, B.p, C.p, M, N, K);
        });
        check("v5 2D register tiles, vectorized", [&] {
            matmul_reg_tiles_2d<<<dim3(N / kBN5, M / kBM5), kThreads5>>>(A.p, B.p, C.p, M, N, K);
        });
        check("v6 mma.sync + ldmatrix + cp.async", [&] {
            matmul_mma_sync<<<dim3(N / kBN6, M / kBM6), kThreads6>>>(A.p, B.p, C.p, M, N, K);
        });
        if (only.empty() || only == "cublaslt") {
            Cublas lt(M, N, K);
            check("cublaslt", [&] { lt.run(A.p, B.p, C.p); });
        }
        std::printf("\n%s\n", all_ok ? "all versions PASS" : "some version FAILED");
        return all_ok ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
