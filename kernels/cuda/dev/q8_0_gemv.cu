// The Q8_0 decode GEMV (one row: out[n] = W x), three layouts of the same
// weights, each checked against a CPU twin and timed on Llama-3-8B's shapes. An
// experiment in the llm.c dev/cuda style, not engine code.
//
//  v1 fp32 GEMV: cuda::launch_quant_gemv on GGUF's 34-byte blocks as the file
//     has them (an fp16 scale, 32 int8 quants). quant_tiles.cuh stages each
//     warp's tile through shared memory with cp.async, then reads its units
//     16 bits at a time: a block is only 2-byte aligned. PERFLOG's profile of
//     4 December 2026 put this GEMV at 52% of the bandwidth, limited by L1.
//  v2 repacked: the same bytes in two arrays, made once at load: each row's
//     quants contiguous (so 16-byte aligned when k is a multiple of 16) and its
//     scales apart. A lane reads 16 quants with one 16-byte load straight from
//     global memory, like the FP8 GEMV (kernels/cuda/gemv.cu), and the scale of
//     their block with a 2-byte one; with `prefetch` the next word's loads are
//     issued before this one's are used. Sums are per 16 quants, scaled once.
//
//  v3 production: 8 blocks regrouped into 272 bytes at load (their 8 scales,
//     then their quants: quant_blocks.cuh's Q8_0x8, which every reader of the
//     blocks understands), and the activations quantized to int8 once per call:
//     a lane's two quant words meet 32 int8 activations in 8 dp4a
//     (gemv_int8.cu). Its numerics differ (int8 activations), so it is checked
//     against a looser bound; its times include the quantization launch.
//
//   minfer_dev_q8_0_gemv [--runs N]
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/dev/gemv_bench.cuh"
#include "kernels/cuda/ladder/common.cuh"
#include "kernels/cuda/load_stream.cuh"

namespace {

using minfer::cuda::load_stream;

constexpr int kWarps = 4;
constexpr int kBlock = 32, kBlockBytes = 34;  // Q8_0: fp16 d, int8 qs[32]

// sum_j q_j * x_j over 16 int8 quants and 16 activations. Each byte, made
// unsigned (q + 128), goes into the mantissa of 2^23, and one exact
// subtraction takes 2^23 + 128 off: two instructions a weight, where a
// conversion instruction would run at a quarter of the FMA rate.
__device__ __forceinline__ float dot16(uint4 q, const float (&x)[16]) {
    constexpr float kBase = 8388608.0f + 128.0f;
    const uint32_t words[4] = {q.x ^ 0x80808080u, q.y ^ 0x80808080u, q.z ^ 0x80808080u, q.w ^ 0x80808080u};
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
            s = fmaf(__int_as_float(__byte_perm(words[i], 0x4B000000u, 0x7540 + j)) - kBase, x[4 * i + j], s);
    return s;
}

// v2: a warp owns F features; lane l takes words l, l + 32, ... of each row
// (16 quants a word, two words a block). k is a multiple of 32.
template <int F, bool kPrefetch>
__global__ void __launch_bounds__(kWarps * 32)
    repacked_gemv(const float* __restrict__ x, int32_t k, const uint4* __restrict__ q, const __half* __restrict__ d,
                  int32_t n, float* __restrict__ out) {
    const int32_t words = k / 16, blocks = k / kBlock;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int32_t f0 = (int32_t(blockIdx.x) * kWarps + warp) * F;
    if (f0 >= n) return;
    const uint4* rows_q[F];
    const __half* rows_d[F];
#pragma unroll
    for (int f = 0; f < F; ++f) {
        const size_t row = size_t(min(f0 + f, n - 1));
        rows_q[f] = q + row * size_t(words);
        rows_d[f] = d + row * size_t(blocks);
    }
    auto load = [&](int32_t c, uint4 (&qv)[F], __half (&dv)[F]) {
#pragma unroll
        for (int f = 0; f < F; ++f) {
            qv[f] = c < words ? load_stream(rows_q[f] + c) : make_uint4(0, 0, 0, 0);
            dv[f] = c < words ? rows_d[f][c / 2] : __half(0.0f);
        }
    };
    float acc[F] = {};
    uint4 qv[F];
    __half dv[F];
    if constexpr (kPrefetch) load(lane, qv, dv);
    for (int32_t c = lane; c < words; c += 32) {
        uint4 next_q[F];
        __half next_d[F];
        if constexpr (kPrefetch)
            load(c + 32, next_q, next_d);
        else
            load(c, qv, dv);
        float xs[16];  // this word's activations, for every feature
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float4 v = __ldg(reinterpret_cast<const float4*>(x + 16 * size_t(c)) + i);
            xs[4 * i] = v.x, xs[4 * i + 1] = v.y, xs[4 * i + 2] = v.z, xs[4 * i + 3] = v.w;
        }
#pragma unroll
        for (int f = 0; f < F; ++f) acc[f] = fmaf(__half2float(dv[f]), dot16(qv[f], xs), acc[f]);
        if constexpr (kPrefetch)
#pragma unroll
            for (int f = 0; f < F; ++f) qv[f] = next_q[f], dv[f] = next_d[f];
    }
#pragma unroll
    for (int f = 0; f < F; ++f) {
        float v = acc[f];
#pragma unroll
        for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
        if (lane == 0 && f0 + f < n) out[f0 + f] = v;
    }
}

// Random Q8_0 blocks: finite fp16 scales around 0.01, quants in [-127, 127].
std::vector<uint8_t> random_blocks(int32_t n, int32_t k, uint32_t seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> scale(0.002f, 0.02f);
    std::uniform_int_distribution<int> quant(-127, 127);
    std::vector<uint8_t> blocks(size_t(n) * (k / kBlock) * kBlockBytes);
    for (size_t b = 0; b < blocks.size(); b += kBlockBytes) {
        const __half h = __float2half(scale(gen));
        std::memcpy(&blocks[b], &h, 2);
        for (int j = 0; j < kBlock; ++j) blocks[b + 2 + j] = uint8_t(int8_t(quant(gen)));
    }
    return blocks;
}

double half_to_double(const uint8_t* p) {
    __half h;
    std::memcpy(&h, p, 2);
    return double(__half2float(h));
}

// The CPU twin, in double: out[f] = sum over blocks of d * sum_j q_j x_j.
std::vector<double> reference(const std::vector<uint8_t>& blocks, const std::vector<float>& x, int32_t n, int32_t k) {
    std::vector<double> out(static_cast<size_t>(n));
    const int32_t per_row = k / kBlock;
    for (int32_t f = 0; f < n; ++f) {
        double acc = 0.0;
        for (int32_t b = 0; b < per_row; ++b) {
            const uint8_t* block = &blocks[(size_t(f) * per_row + b) * kBlockBytes];
            double s = 0.0;
            for (int j = 0; j < kBlock; ++j) s += double(int8_t(block[2 + j])) * double(x[size_t(b) * kBlock + j]);
            acc += half_to_double(block) * s;
        }
        out[size_t(f)] = acc;
    }
    return out;
}

bool run_shape(const dev::Shape& s, int runs) {
    const size_t bytes = size_t(s.n) * (s.k / kBlock) * kBlockBytes;
    const std::vector<uint8_t> blocks = random_blocks(s.n, s.k, 7);
    std::vector<float> x(size_t(s.k));
    ladder::fill_uniform(x, -1.0f, 1.0f, 11);
    const std::vector<double> ref = reference(blocks, x, s.n, s.k);

    // v2's arrays, repacked on the host (the engine would do it once at load).
    const int32_t per_row = s.k / kBlock;
    std::vector<uint8_t> quants(size_t(s.n) * s.k);
    std::vector<uint8_t> scales(size_t(s.n) * per_row * 2);
    for (size_t b = 0; b < size_t(s.n) * per_row; ++b) {
        std::memcpy(&scales[2 * b], &blocks[b * kBlockBytes], 2);
        std::memcpy(&quants[b * kBlock], &blocks[b * kBlockBytes + 2], kBlock);
    }

    const int copies = dev::copies_for(bytes);
    const dev::DeviceCopies raw(blocks.data(), blocks.size(), copies), q(quants.data(), quants.size(), copies),
        d(scales.data(), scales.size(), copies);
    ladder::DeviceArray<float> x_d(x.size()), out_d(static_cast<size_t>(s.n));
    CUDA_CHECK(cudaMemcpy(x_d.p, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));

    std::printf("\n%s: n=%d k=%d, %.1f MB of Q8_0 blocks, %d copies\n", s.name, s.n, s.k, bytes / 1e6, copies);
    dev::VersionCheck check(out_d.p, ref, copies, runs, double(bytes));
    check("v1 fp32 GEMV (34-byte blocks)", 1e-5, [&](int i) {
        minfer::cuda::launch_quant_gemv(minfer::cuda::QType::Q8_0, x_d.p, 1, s.k, raw[i], s.n, out_d.p, nullptr);
    });
    auto repacked = [&](auto kernel, int features) {
        return [&, kernel, features](int i) {
            const unsigned grid = unsigned((s.n + kWarps * features - 1) / (kWarps * features));
            kernel<<<grid, kWarps * 32>>>(x_d.p, s.k, reinterpret_cast<const uint4*>(q[i]),
                                          reinterpret_cast<const __half*>(d[i]), s.n, out_d.p);
        };
    };
    check("v2 repacked, 2 features", 1e-5, repacked(repacked_gemv<2, false>, 2));
    check("v2 repacked, 2 features, prefetch", 1e-5, repacked(repacked_gemv<2, true>, 2));
    check("v2 repacked, 4 features", 1e-5, repacked(repacked_gemv<4, false>, 4));
    check("v2 repacked, 4 features, prefetch", 1e-5, repacked(repacked_gemv<4, true>, 4));
    check("v2 repacked, 8 features, prefetch", 1e-5, repacked(repacked_gemv<8, true>, 8));

    // v3's layout, regrouped on the host as the backend's upload does.
    std::vector<uint8_t> grouped(blocks.size());
    for (size_t g = 0; g < blocks.size() / (8 * kBlockBytes); ++g)
        for (size_t i = 0; i < 8; ++i) {
            const uint8_t* from = &blocks[(8 * g + i) * kBlockBytes];
            std::memcpy(&grouped[g * 8 * kBlockBytes + 2 * i], from, 2);
            std::memcpy(&grouped[g * 8 * kBlockBytes + 16 + kBlock * i], from + 2, kBlock);
        }
    const dev::DeviceCopies g8(grouped.data(), grouped.size(), copies);
    ladder::DeviceArray<uint8_t> act(minfer::cuda::int8_act_bytes(1, s.k));
    check("v3 production (regrouped, int8 activations)", 2e-2, [&](int i) {
        const minfer::cuda::GemvTarget target{g8[i], s.n, out_d.p};
        minfer::cuda::launch_quantize_int8(x_d.p, 1, s.k, act.p, nullptr);
        minfer::cuda::launch_int8_gemv_group(minfer::cuda::QType::Q8_0x8, act.p, 1, s.k, &target, 1, nullptr);
    });
    for (int features : {1, 4})
        for (bool prefetch : {false, true}) {
            const std::string name = "v3 " + std::to_string(features) + " feature" + (features > 1 ? "s" : "") +
                                     (prefetch ? ", prefetch" : "");
            check(name.c_str(), 2e-2, [&](int i) {
                minfer::cuda::launch_quantize_int8(x_d.p, 1, s.k, act.p, nullptr);
                minfer::cuda::launch_int8_gemv_variant(minfer::cuda::QType::Q8_0x8, features, prefetch, act.p, s.k,
                                                       g8[i], s.n, out_d.p, nullptr);
            });
        }
    return check.ok();
}

}  // namespace

int main(int argc, char** argv) {
    return dev::run_all(argc, argv, "GB/s counts the Q8_0 bytes (34 per 32 weights) once",
                        {{"q/o", 4096, 4096},
                         {"q/k/v as one", 6144, 4096},
                         {"gate+up as one", 28672, 4096},
                         {"down", 4096, 14336},
                         {"lm_head", 128256, 4096}},
                        run_shape);
}
