// The decode GEMVs of Q4_K and Q6_K (one row: out[n] = W x), the version on
// fp32 activations beside the production one on int8 activations and its other
// tilings, each checked against a CPU twin and timed on Llama-3-8B's shapes
// (a Q4_K_M file holds its layers in both types, and its LM head in Q6_K). An
// experiment in the llm.c dev/cuda style, not engine code.
//
//  v1 fp32 activations: cuda::launch_quant_gemv, the engine's GEMV for the
//     other quantized types. quant_tiles.cuh stages each warp's tile through
//     shared memory with cp.async, decodes 8 weights at a time to fp32 and
//     multiplies them by fp32 activations: about three instructions a weight
//     (extract, convert, FMA). PERFLOG's profile of 4 December 2026: Q4_K at 31%
//     of the bandwidth, SM 55%, memory 50%: instructions and latency, not HBM.
//  v2 int8 activations (gemv_int8.cu, production): the activations quantized
//     once per call to int8 with a scale and sum per 32, as llama.cpp's MMVQ and
//     this engine's CPU backend do; a lane takes one unit of 32 weights (a
//     16-byte word of levels, for Q6_K also the word of their top bits, and the
//     block's scales) straight from global memory and multiplies 4 levels by 4
//     int8 activations in one dp4a. Tilings: 1, 2 or 4 features a warp, with or
//     without the next unit's loads issued before this one's are used; all give
//     the same bits as production (a lane's sums run in one order), which the
//     run checks.
//
// v2 changes the numerics (int8 activations: about 0.3% relative error in a
// row of 4,096, the same order as the CPU backend's own int8 dots), so it is
// checked against a looser bound than v1. Its times include quantizing the
// activations (a launch of its own). GB/s counts the blocks as the device holds
// them (Q6_K padded from 210 to 224 bytes).
//
//   minfer_dev_k_quant_gemv [--runs N]
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/ladder/common.cuh"
#include "kernels/cuda/dev/gemv_bench.cuh"
#include "kernels/cuda/dev/k_quant_host.h"

namespace {

using minfer::cuda::QType;

bool run_shape(dev::KQuant type, const dev::Shape& s, int runs) {
    const QType q = type == dev::KQuant::Q4_K ? QType::Q4_K : QType::Q6_K;
    const char* type_name = type == dev::KQuant::Q4_K ? "Q4_K" : "Q6_K";
    // Realistic blocks (random normal weights through the CPU's quantizer), and
    // the CPU twin in double over the CPU's own dequantization.
    const std::vector<uint8_t> file_rows = dev::k_quant_random_rows(type, s.n, s.k, 5);
    const std::vector<uint8_t> blocks = dev::device_layout(type, file_rows);
    const size_t bytes = blocks.size();
    std::vector<float> x(static_cast<size_t>(s.k));
    ladder::fill_uniform(x, -1.0f, 1.0f, 13);
    const std::vector<double> ref = dev::k_quant_reference(type, file_rows, x, s.n, s.k);

    const int copies = dev::copies_for(bytes);
    const dev::DeviceCopies ws(blocks.data(), bytes, copies);
    ladder::DeviceArray<float> x_d(x.size()), out_d(static_cast<size_t>(s.n));
    ladder::DeviceArray<uint8_t> act(minfer::cuda::int8_act_bytes(1, s.k));
    CUDA_CHECK(cudaMemcpy(x_d.p, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));

    std::printf("\n%s %s: n=%d k=%d, %.1f MB of blocks, %d copies\n", type_name, s.name, s.n, s.k, bytes / 1e6,
                copies);
    dev::VersionCheck check(out_d.p, ref, copies, runs, double(bytes));
    check("v1 fp32 activations", 1e-5,
          [&](int i) { minfer::cuda::launch_quant_gemv(q, x_d.p, 1, s.k, ws[i], s.n, out_d.p, nullptr); });
    check("v2 production (int8 activations)", 2e-2, [&](int i) {
        const minfer::cuda::GemvTarget target{ws[i], s.n, out_d.p};
        minfer::cuda::launch_quantize_int8(x_d.p, 1, s.k, act.p, nullptr);
        minfer::cuda::launch_int8_gemv_group(q, act.p, 1, s.k, &target, 1, nullptr);
    });
    std::vector<float> production(static_cast<size_t>(s.n)), got(production.size());
    CUDA_CHECK(cudaMemcpy(production.data(), out_d.p, production.size() * sizeof(float), cudaMemcpyDeviceToHost));
    bool same_bits = true;
    for (int features : {1, 2, 4})
        for (bool prefetch : {false, true}) {
            const std::string name = "v2 " + std::to_string(features) + " feature" + (features > 1 ? "s" : "") +
                                     (prefetch ? ", prefetch" : "");
            check(name.c_str(), 2e-2, [&](int i) {
                minfer::cuda::launch_quantize_int8(x_d.p, 1, s.k, act.p, nullptr);
                if (!minfer::cuda::launch_int8_gemv_variant(q, features, prefetch, act.p, s.k, ws[i], s.n, out_d.p,
                                                            nullptr))
                    throw std::logic_error("no such tiling");
            });
            CUDA_CHECK(cudaMemcpy(got.data(), out_d.p, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
            if (std::memcmp(got.data(), production.data(), got.size() * sizeof(float)) != 0) {
                std::printf("  %s differs from production's bits\n", name.c_str());
                same_bits = false;
            }
        }
    return check.ok() && same_bits;
}

}  // namespace

int main(int argc, char** argv) {
    const std::vector<dev::Shape> shapes = {{"q/o", 4096, 4096},
                                            {"q/k/v as one", 6144, 4096},
                                            {"gate+up as one", 28672, 4096},
                                            {"down", 4096, 14336},
                                            {"lm_head", 128256, 4096}};
    return dev::run_all(argc, argv, "v2's times include the activations' quantization", shapes,
                        [](const dev::Shape& s, int runs) {
                            // The LM head is Q6_K in a Q4_K_M file; down is either.
                            const bool q4 = std::string(s.name) != "lm_head";
                            return (!q4 || run_shape(dev::KQuant::Q4_K, s, runs)) &
                                   run_shape(dev::KQuant::Q6_K, s, runs);
                        });
}
