// Activations quantized to int8 for the GEMVs of gemv_int8.cu: rows x k int8
// levels, then an fp32 (scale, sum) pair per group of 32 activations
// (q = round(x / scale), scale = max |x| / 127, sum = the fp32 activations'
// sum). quantize_int8_kernel makes them from a float matrix; the ops whose
// output a matmul reads next (RMSNorm, SwiGLU/GeGLU) can write them beside it
// with store_int8_quad, as they write a bf16 copy for the GEMMs.
#pragma once

#include <cstddef>
#include <cstdint>

namespace minfer::cuda {

constexpr int kInt8Group = 32;  // activations per int8 scale

struct Int8Act {
    int8_t* q;   // rows x k
    float2* ds;  // rows x k / 32
};

inline Int8Act int8_act_parts(void* act, int32_t rows, int32_t k) {
    auto* base = static_cast<uint8_t*>(act);
    const size_t q_bytes = (size_t(rows) * size_t(k) + 15) / 16 * 16;
    return {reinterpret_cast<int8_t*>(base), reinterpret_cast<float2*>(base + q_bytes)};
}

// The level of activation v in a group of scale d = max |x| / 127: round(v / d),
// 0 throughout an all-zero group.
__device__ __forceinline__ int8_t int8_level(float v, float d) { return int8_t(d > 0.0f ? __float2int_rn(v / d) : 0); }

// Four consecutive activations a lane, eight lanes (aligned in the warp) a
// group of 32 starting at flat index 4 * i, i the lane's quad: every lane of
// the warp must call it (it shuffles with the full mask).
__device__ __forceinline__ void store_int8_quad(float4 y, int64_t i, Int8Act act) {
    float amax = fmaxf(fmaxf(fabsf(y.x), fabsf(y.y)), fmaxf(fabsf(y.z), fabsf(y.w)));
    float sum = (y.x + y.y) + (y.z + y.w);
#pragma unroll
    for (int off = 1; off < 8; off *= 2) {
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
        sum += __shfl_xor_sync(0xffffffffu, sum, off);
    }
    const float d = amax / 127.0f;
    auto level = [d](float v) { return uint32_t(uint8_t(int8_level(v, d))); };
    reinterpret_cast<uint32_t*>(act.q)[i] = level(y.x) | level(y.y) << 8 | level(y.z) << 16 | level(y.w) << 24;
    if (i % 8 == 0) act.ds[i / 8] = make_float2(d, sum);
}

}  // namespace minfer::cuda
