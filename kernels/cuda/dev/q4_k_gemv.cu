// The Q4_K decode GEMV (one row: out[n] = W x), production beside a version on
// int8 activations, each checked against a CPU twin and timed on Llama-3-8B's
// shapes. An experiment in the llm.c dev/cuda style, not engine code.
//
//  v1 production: cuda::launch_quant_gemv, fp32 activations. quant_tiles.cuh
//     stages each warp's tile through shared memory with cp.async, decodes 8
//     weights at a time to fp32 and multiplies them by fp32 activations: about
//     three instructions a weight (extract, convert, FMA). PERFLOG's profile of
//     4 December 2026: 31% of the bandwidth, SM 55%, memory 50%: instructions
//     and latency, not HBM.
//  v2 dp4a: the activations are quantized once per call to int8 with a scale
//     per 32 (and their fp32 sum per 32, for the mins), as llama.cpp's MMVQ and
//     this engine's CPU backend do. A lane takes one 16-byte word of a block's
//     quants (32 weights: 16 low nibbles of one sub-block, 16 high nibbles of
//     the next) straight from global memory, plus the block's 16-byte header,
//     and multiplies 4 nibbles by 4 int8 activations in one dp4a: about a
//     third of an instruction a weight. With `prefetch` the next words' loads
//     are issued before this one's are used.
//
// v2 changes the numerics (int8 activations: about 0.5% relative error in a
// row of 4,096, the same order as the CPU backend's own int8 dots), so it is
// checked against a looser bound than v1.
//
//   minfer_dev_q4_k_gemv [--runs N]
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/ladder/common.cuh"
#include "kernels/cuda/dev/gemv_bench.cuh"
#include "kernels/cuda/dev/q4_k_host.h"
#include "kernels/cuda/load_stream.cuh"

namespace {

using minfer::cuda::load_stream;

constexpr int kWarps = 4;
constexpr int kQK = 256, kBlockBytes = 144, kBlockWords = 9;  // d, dmin, scales[12]; qs[128]

// x (k fp32) -> xq (k int8), and per 32: the scale d = amax / 127 and the fp32
// sum of the 32 activations. One warp a group of 32, a lane an activation.
__global__ void quantize_x(const float* __restrict__ x, int32_t k, int8_t* __restrict__ xq, float* __restrict__ dx,
                           float* __restrict__ sx) {
    const int32_t i = int32_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const float v = i < k ? x[i] : 0.0f;
    float amax = fabsf(v), sum = v;
#pragma unroll
    for (int off = 16; off > 0; off /= 2) {
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
        sum += __shfl_xor_sync(0xffffffffu, sum, off);
    }
    const float d = amax / 127.0f;
    if (i < k) xq[i] = int8_t(d > 0.0f ? __float2int_rn(v / d) : 0);
    if (threadIdx.x % 32 == 0 && i < k) {
        dx[i / 32] = d;
        sx[i / 32] = sum;
    }
}

// The 6-bit scale and min of sub-blocks s and s + 1 (s even) from a block's
// 12 scale bytes, held as three 32-bit words (bytes 4-15 of the header).
__device__ __forceinline__ void scale_min_pair(const uint32_t (&sw)[3], int s, float (&sc)[2], float (&m)[2]) {
    auto byte = [&](int j) { return (sw[j / 4] >> (8 * (j % 4))) & 0xffu; };
#pragma unroll
    for (int t = 0; t < 2; ++t) {
        const int j = s + t;
        if (j < 4) {
            sc[t] = float(byte(j) & 63u);
            m[t] = float(byte(j + 4) & 63u);
        } else {
            sc[t] = float((byte(j + 4) & 0xfu) | ((byte(j - 4) >> 6) << 4));
            m[t] = float((byte(j + 4) >> 4) | ((byte(j) >> 6) << 4));
        }
    }
}

// v2: a warp owns F features. Word c of a row's stretch (lane l, c = 32 i + l)
// is quants word (c % 8) of block (c / 8): group g = word / 2 (64 weights),
// half h = word % 2. Its low nibbles are weights 64 g + 16 h + 0..15 (sub-block
// 2 g), its high nibbles 64 g + 32 + 16 h + 0..15 (sub-block 2 g + 1).
template <int F, bool kPrefetch>
__global__ void __launch_bounds__(kWarps * 32)
    dp4a_gemv(const int8_t* __restrict__ xq, const float* __restrict__ dx, const float* __restrict__ sx, int32_t k,
              const uint4* __restrict__ w, int32_t n, float* __restrict__ out) {
    const int32_t blocks = k / kQK, units = blocks * 8;  // quants words a row
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int32_t f0 = (int32_t(blockIdx.x) * kWarps + warp) * F;
    if (f0 >= n) return;
    const uint4* rows[F];
#pragma unroll
    for (int f = 0; f < F; ++f) rows[f] = w + size_t(min(f0 + f, n - 1)) * size_t(blocks) * kBlockWords;
    auto load = [&](int32_t c, uint4 (&hv)[F], uint4 (&qv)[F]) {
        const int32_t b = c / 8, word = c % 8;
#pragma unroll
        for (int f = 0; f < F; ++f) {
            hv[f] = c < units ? load_stream(rows[f] + size_t(b) * kBlockWords) : make_uint4(0, 0, 0, 0);
            qv[f] = c < units ? load_stream(rows[f] + size_t(b) * kBlockWords + 1 + word) : make_uint4(0, 0, 0, 0);
        }
    };
    float acc[F] = {};
    uint4 hv[F], qv[F];
    if constexpr (kPrefetch) load(lane, hv, qv);
    for (int32_t c = lane; c < units; c += 32) {
        uint4 next_h[F], next_q[F];
        if constexpr (kPrefetch)
            load(c + 32, next_h, next_q);
        else
            load(c, hv, qv);
        const int32_t b = c / 8, word = c % 8, g = word / 2, h = word % 2;
        const int32_t lo = b * kQK + 64 * g + 16 * h;  // the low nibbles' first activation
        const uint4 xlo = *reinterpret_cast<const uint4*>(xq + lo);
        const uint4 xhi = *reinterpret_cast<const uint4*>(xq + lo + 32);
        const float dlo = dx[lo / 32], dhi = dx[lo / 32 + 1];
        const float slo = h == 0 ? sx[lo / 32] : 0.0f, shi = h == 0 ? sx[lo / 32 + 1] : 0.0f;  // once a sub-block
        const int xl[4] = {int(xlo.x), int(xlo.y), int(xlo.z), int(xlo.w)};
        const int xh[4] = {int(xhi.x), int(xhi.y), int(xhi.z), int(xhi.w)};
#pragma unroll
        for (int f = 0; f < F; ++f) {
            const uint32_t q[4] = {qv[f].x, qv[f].y, qv[f].z, qv[f].w};
            int dot_lo = 0, dot_hi = 0;
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                dot_lo = __dp4a(int(q[i] & 0x0f0f0f0fu), xl[i], dot_lo);
                dot_hi = __dp4a(int((q[i] >> 4) & 0x0f0f0f0fu), xh[i], dot_hi);
            }
            const float2 dm = __half22float2(*reinterpret_cast<const __half2*>(&hv[f].x));  // d, dmin
            const uint32_t sw[3] = {hv[f].y, hv[f].z, hv[f].w};
            float sc[2], m[2];
            scale_min_pair(sw, 2 * g, sc, m);
            acc[f] += dm.x * (sc[0] * dlo * float(dot_lo) + sc[1] * dhi * float(dot_hi)) -
                      dm.y * (m[0] * slo + m[1] * shi);
        }
        if constexpr (kPrefetch)
#pragma unroll
            for (int f = 0; f < F; ++f) hv[f] = next_h[f], qv[f] = next_q[f];
    }
#pragma unroll
    for (int f = 0; f < F; ++f) {
        float v = acc[f];
#pragma unroll
        for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
        if (lane == 0 && f0 + f < n) out[f0 + f] = v;
    }
}

bool run_shape(const dev::Shape& s, int runs) {
    // Realistic blocks (random normal weights through the CPU's Q4_K quantizer),
    // and the CPU twin in double over the CPU's own dequantization.
    const size_t bytes = size_t(s.n) * (s.k / kQK) * kBlockBytes;
    const std::vector<uint8_t> blocks = dev::q4_k_random_rows(s.n, s.k, 5);
    std::vector<float> x(static_cast<size_t>(s.k));
    ladder::fill_uniform(x, -1.0f, 1.0f, 13);
    const std::vector<double> ref = dev::q4_k_reference(blocks, x, s.n, s.k);

    const int copies = dev::copies_for(bytes);
    const dev::DeviceCopies ws(blocks.data(), bytes, copies);
    ladder::DeviceArray<float> x_d(x.size()), out_d(static_cast<size_t>(s.n)), dx(x.size() / 32), sx(x.size() / 32);
    ladder::DeviceArray<int8_t> xq(x.size());
    CUDA_CHECK(cudaMemcpy(x_d.p, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));

    std::printf("\n%s: n=%d k=%d, %.1f MB of Q4_K blocks, %d copies\n", s.name, s.n, s.k, bytes / 1e6, copies);
    dev::VersionCheck check(out_d.p, ref, copies, runs, double(bytes));
    check("v1 production (fp32 activations)", 1e-5, [&](int i) {
        minfer::cuda::launch_quant_gemv(minfer::cuda::QType::Q4_K, x_d.p, 1, s.k, ws[i], s.n, out_d.p, nullptr);
    });
    // v2's time includes quantizing the activations (a launch of its own).
    auto dp4a = [&](auto kernel, int features) {
        return [&, kernel, features](int i) {
            quantize_x<<<unsigned((s.k + 127) / 128), 128>>>(x_d.p, s.k, xq.p, dx.p, sx.p);
            const unsigned grid = unsigned((s.n + kWarps * features - 1) / (kWarps * features));
            kernel<<<grid, kWarps * 32>>>(xq.p, dx.p, sx.p, s.k, reinterpret_cast<const uint4*>(ws[i]), s.n, out_d.p);
        };
    };
    check("v2 dp4a, 2 features", 2e-2, dp4a(dp4a_gemv<2, false>, 2));
    check("v2 dp4a, 2 features, prefetch", 2e-2, dp4a(dp4a_gemv<2, true>, 2));
    check("v2 dp4a, 4 features", 2e-2, dp4a(dp4a_gemv<4, false>, 4));
    check("v2 dp4a, 4 features, prefetch", 2e-2, dp4a(dp4a_gemv<4, true>, 4));
    return check.ok();
}

}  // namespace

int main(int argc, char** argv) {
    return dev::run_all(argc, argv, "GB/s counts the Q4_K bytes (144 per 256 weights) once",
                        {{"q/o", 4096, 4096}, {"q/k/v as one", 6144, 4096}, {"gate+up as one", 28672, 4096},
                         {"down", 4096, 14336}},
                        run_shape);
}
