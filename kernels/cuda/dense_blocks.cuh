// Plain F32/F16/BF16 weights seen as blocks of 32 with quant_blocks.cuh's
// interface (kElems, kBytes, kUnits, kSubs, col, load, dequant), so that the
// tile loops of quant_tiles.cuh run over them unchanged. moe.cu's experts use
// them: one grouped kernel serves every expert format. A block has no scales;
// unit u is its 16 consecutive weights 16u..16u+15 (16-byte loads: rows of a
// multiple of 32 weights keep every block 16-byte aligned), sub-group s their
// weights 16u + 8s..+7.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace minfer::cuda::quant {

template <class Elem>
struct DenseBlock {
    static constexpr int kElems = 32, kBytes = 32 * int(sizeof(Elem)), kAlign = 16, kUnits = 2, kSubs = 2;
    static constexpr int kWords = 16 * int(sizeof(Elem)) / 16;  // 16-byte words a unit
    struct Unit {
        uint4 q[kWords];
    };
    __device__ static int col(int u, int s, int h) { return 16 * u + 8 * s + 4 * h; }
    __device__ static Unit load(const uint8_t* b, int u) {
        Unit un;
        const uint4* p = reinterpret_cast<const uint4*>(b + kBytes / 2 * u);
#pragma unroll
        for (int i = 0; i < kWords; ++i) un.q[i] = p[i];
        return un;
    }
    __device__ static void dequant(const Unit& un, int s, float (&w)[8]) {
        const Elem* e = reinterpret_cast<const Elem*>(un.q) + 8 * s;
#pragma unroll
        for (int i = 0; i < 8; ++i) w[i] = to_float(e[i]);
    }
    __device__ static float to_float(float v) { return v; }
    __device__ static float to_float(__half v) { return __half2float(v); }
    __device__ static float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
};
using F32Block = DenseBlock<float>;
using F16Block = DenseBlock<__half>;
using BF16Block = DenseBlock<__nv_bfloat16>;

}  // namespace minfer::cuda::quant
