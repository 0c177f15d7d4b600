// The quantized GEMM of batched decode (9 to 64 rows: out[r, :] = W x[r, :]),
// its two structures side by side on Llama-3-8B's Q4_K_M shapes, each checked
// and timed. An experiment in the llm.c dev/cuda style, not engine code: both
// versions are quant_tiles.cuh's qmm_tile, which the engine runs through
// launch_quant_gemm, here launched with each tile count at 32 and 64 rows.
//
//  v1 one weight tile: each stretch of 256 weights along k is decoded into the
//     bf16 tile, a barrier, the tensor-core products, a barrier. With one CTA an
//     SM at 64 rows (143 KB of shared memory, up to 250 registers a thread),
//     nothing runs beside either phase: ncu found the issue slots 25% busy
//     (PERFLOG, 4 December 2026). The engine's version up to 32 rows.
//  v2 two weight tiles: each warp decodes one of the next stretch's units into
//     the other tile after every few mma steps of this one; one barrier a
//     stretch. 219 KB of shared memory at 64 rows. The engine's version above
//     32 rows.
//
// Both add the same products in the same order, so v2 must equal v1 bit for
// bit, and the engine's launch_quant_gemm must equal the version it runs at
// that row count (its time includes converting the activations to bf16, a
// launch of its own). v1 is checked against a CPU twin in double over the first
// rows. GB/s counts the blocks as the device holds them (Q6_K padded to 224
// bytes); Q4_K_M files hold their layers in Q4_K and Q6_K, and the LM head in Q6_K.
//
//   minfer_dev_quant_gemm [--runs N]
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/dev/gemv_bench.cuh"
#include "kernels/cuda/dev/k_quant_host.h"
#include "kernels/cuda/ladder/common.cuh"
#include "kernels/cuda/quant_blocks.cuh"
#include "kernels/cuda/quant_tiles.cuh"

namespace {

namespace cu = minfer::cuda;
namespace tiles = minfer::cuda::tiles;

constexpr int kCheckRows = 4;  // rows checked against the CPU (the lm_head's reference is 0.5 G products a row)

template <class Q, int MT, int WTiles>
__global__ void __launch_bounds__(tiles::kQmmThreads)
    qmm_kernel(const __nv_bfloat16* __restrict__ x, int32_t rows, int32_t k, const uint8_t* __restrict__ w, int32_t n,
               int32_t per_split, float* __restrict__ out) {
    const int32_t first = int32_t(blockIdx.y) * per_split;
    const int32_t last = min((k + tiles::kQmmK - 1) / tiles::kQmmK, first + per_split);
    tiles::qmm_tile<Q, MT, WTiles>(x, rows, k, w, n, first, last, out + int64_t(blockIdx.y) * rows * n);
}

// The engine's split of k (cu::quant_gemm_split) and sum of the splits.
template <class Q, int MT, int WTiles>
void launch(const __nv_bfloat16* x, int32_t rows, int32_t k, const uint8_t* w, int32_t n, cu::QuantGemmSplit s,
            float* parts, float* out) {
    static bool opted_in = false;
    const size_t smem = tiles::qmm_smem_bytes(MT, WTiles);
    if (!opted_in) {
        CUDA_CHECK(cudaFuncSetAttribute(qmm_kernel<Q, MT, WTiles>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        int(smem)));
        opted_in = true;
    }
    const dim3 grid(unsigned((n + tiles::kQmmFeatures - 1) / tiles::kQmmFeatures), unsigned(s.splits));
    qmm_kernel<Q, MT, WTiles><<<grid, tiles::kQmmThreads, smem>>>(x, rows, k, w, n, s.per_split,
                                                                  s.splits > 1 ? parts : out);
    if (s.splits > 1) cu::launch_sum_splits(parts, s.splits, int64_t(rows) * n, out, nullptr);
}

float bf16_to_float(uint16_t h) {
    const uint32_t bits = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// One shape at `rows` rows (16 MT): v1, v2 and the engine's launcher.
template <class Q, int MT>
bool run_shape(dev::KQuant type, cu::QType qtype, const char* type_name, const dev::Shape& s, int32_t rows, int runs) {
    const std::vector<uint8_t> file_rows = dev::k_quant_random_rows(type, s.n, s.k, 5);
    const std::vector<uint8_t> blocks = dev::device_layout(type, file_rows);
    const size_t bytes = blocks.size();
    const int copies = dev::copies_for(bytes);
    dev::DeviceCopies w(blocks.data(), bytes, copies);

    // The activations in bf16, as launch_quant_gemm converts them; the reference
    // multiplies the same rounded values.
    std::vector<float> x(size_t(rows) * s.k);
    ladder::fill_uniform(x, -1.0f, 1.0f, 13);
    ladder::DeviceArray<float> x_d(x.size());
    CUDA_CHECK(cudaMemcpy(x_d.p, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
    ladder::DeviceArray<__nv_bfloat16> xb(x.size());
    cu::launch_rows_to_bf16(x_d.p, rows, s.k, s.k, xb.p, nullptr);
    std::vector<uint16_t> xb_host(x.size());
    CUDA_CHECK(cudaMemcpy(xb_host.data(), xb.p, x.size() * 2, cudaMemcpyDeviceToHost));
    std::vector<double> ref;
    for (int32_t r = 0; r < kCheckRows; ++r) {
        std::vector<float> row(size_t(s.k));
        for (int32_t i = 0; i < s.k; ++i) row[size_t(i)] = bf16_to_float(xb_host[size_t(r) * s.k + i]);
        const std::vector<double> part = dev::k_quant_reference(type, file_rows, row, s.n, s.k);
        ref.insert(ref.end(), part.begin(), part.end());
    }

    const size_t count = size_t(rows) * s.n;
    const size_t ws_bytes = cu::quant_gemm_workspace_bytes(rows, s.k) + sizeof(float) * count * tiles::kQmmMaxSplits;
    ladder::DeviceArray<uint8_t> workspace(ws_bytes);
    const cu::QuantGemmSplit split = cu::quant_gemm_split(rows, s.k, s.n, ws_bytes);
    ladder::DeviceArray<float> out(count), parts(count * size_t(split.splits));
    std::printf("\n%s %s n=%d k=%d rows=%d (%.1f MB of blocks, %d split%s of k)\n", type_name, s.name, s.n, s.k, rows,
                bytes / 1e6, split.splits, split.splits > 1 ? "s" : "");

    std::vector<float> v1_out;
    bool ok = true;
    auto version = [&](const char* name, bool bit_equal_to_v1, auto&& launch_copy) {
        CUDA_CHECK(cudaMemset(out.p, 0xff, count * sizeof(float)));  // NaNs: an unwritten output fails
        launch_copy(0);
        CUDA_CHECK_LAUNCH();
        CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<float> got(count);
        CUDA_CHECK(cudaMemcpy(got.data(), out.p, count * sizeof(float), cudaMemcpyDeviceToHost));
        double err = ladder::rel_error(got.data(), ref.data(), ref.size());
        if (v1_out.empty()) v1_out = got;
        if (bit_equal_to_v1 && std::memcmp(got.data(), v1_out.data(), count * sizeof(float)) != 0) {
            std::printf("  %s: not bit-equal to v1\n", name);
            err = 1.0;  // fails the report's threshold
        }
        int i = 0;
        const float ms = ladder::median_ms([&] { launch_copy(i++ % copies); }, runs);
        ok &= ladder::report_bw(name, err, 1e-2, ms, double(bytes));
    };
    version("v1 one weight tile", false,
            [&](int c) { launch<Q, MT, 1>(xb.p, rows, s.k, w[c], s.n, split, parts.p, out.p); });
    version("v2 two weight tiles", true,
            [&](int c) { launch<Q, MT, 2>(xb.p, rows, s.k, w[c], s.n, split, parts.p, out.p); });
    version(MT > 2 ? "engine (v2, with the bf16 conversion)" : "engine (v1, with the bf16 conversion)", true, [&](int c) {
        cu::launch_quant_gemm(qtype, x_d.p, rows, s.k, w[c], s.n, out.p, workspace.p, ws_bytes, nullptr);
    });
    return ok;
}

}  // namespace

int main(int argc, char** argv) {
    const int runs = ladder::runs_flag(argc, argv, 30);
    if (runs < 0) return 2;
    const dev::Shape q4k[] = {{"q/o", 4096, 4096}, {"gate", 14336, 4096}, {"down", 4096, 14336}};
    const dev::Shape q6k[] = {{"down", 4096, 14336}, {"lm_head", 128256, 4096}};
    try {
        ladder::print_device();
        std::printf("median of %d launches after 3 warm-up; GB/s of the blocks as the device holds them\n", runs);
        bool ok = true;
        for (const dev::Shape& s : q4k) {
            ok &= run_shape<cu::quant::Q4_K, 4>(dev::KQuant::Q4_K, cu::QType::Q4_K, "Q4_K", s, 64, runs);
            ok &= run_shape<cu::quant::Q4_K, 2>(dev::KQuant::Q4_K, cu::QType::Q4_K, "Q4_K", s, 32, runs);
        }
        for (const dev::Shape& s : q6k) {
            ok &= run_shape<cu::quant::Q6_K, 4>(dev::KQuant::Q6_K, cu::QType::Q6_K, "Q6_K", s, 64, runs);
            ok &= run_shape<cu::quant::Q6_K, 2>(dev::KQuant::Q6_K, cu::QType::Q6_K, "Q6_K", s, 32, runs);
        }
        std::printf("\n%s\n", ok ? "all versions PASS" : "some version FAILED");
        return ok ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
