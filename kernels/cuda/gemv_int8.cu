// The decode GEMVs of Q4_K, Q6_K and Q8_0 weights on int8 activations
// (llama.cpp's MMVQ idea): the input is quantized once to int8 with an fp32
// scale and sum per 32 activations (launch_quantize_int8), and the GEMV
// multiplies the weights' integer levels by int8 activations with dp4a, four
// products and their sum in one instruction. Q4_K and Q6_K hold a Q4_K_M
// file's every layer matrix and its LM head; Q8_0 a Q8_0 file's.
//
// Why. matmul_quant.cu's GEMV decodes every weight to fp32 before its FMA:
// extract, convert, multiply-add, about three instructions a weight. Its
// profile (PERFLOG, 4 December 2026) was 31% of HBM bandwidth with the SMs
// busy issuing, not waiting on memory. Here a weight costs well under one
// instruction, and the weights come straight from global memory in 16-byte
// words: Q4_K's blocks (144 bytes) are 16-byte aligned, Q6_K's (210 in the
// file) are padded to 224 at upload for this, and Q8_0's (34) regrouped by 8
// into 272 (quant_blocks.cuh's Q8_0x8).
//
// The walk: a block of 256 weights is 8 units of 32; a warp owns F output
// features, and lane l takes units c = l, l + 32, ... of each feature's row
// (unit c % 8 of block c / 8): one 16-byte word of 4-bit levels (Q6_K: and the
// word of their top 2 bits; Q8_0: two words of 8-bit levels) and the block's
// scales. A unit's weights lie in two
// runs of 16 activations, each under one scale, so a lane does two 4-way dp4a
// chains and applies each scale once. The order of a lane's sums does not
// depend on F or prefetching, so every tiling gives the same bits (the bench
// checks they do).
//
// The numbers change: int8 activations round each to 1/254 of its group's
// largest, about 0.3% relative error on a dot product of 4,096, the same kind of
// error the CPU backend's own int8 dot products make (vec_dot.h).
#include <cuda_fp16.h>

#include <stdexcept>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/gemv_common.cuh"
#include "kernels/cuda/int8_act.cuh"
#include "kernels/cuda/load_stream.cuh"
#include "kernels/cuda/pdl.cuh"

namespace minfer::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kGroup = kInt8Group;
constexpr int kBlockElems = 256, kUnits = 8;  // all three types: 8 units of 32 weights a block

// One warp a group of 32 activations, a lane an activation: q = round(x / d)
// with d = max |x| / 127, and the group's (d, sum x). count is a multiple of 32
// and the blocks hold whole warps, so a warp is wholly in range or out.
__global__ void quantize_int8_kernel(const float* __restrict__ x, int64_t count, int8_t* __restrict__ q,
                                     float2* __restrict__ ds) {
    pdl_wait();
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= count) return;
    const float v = x[i];
    float amax = fabsf(v), sum = v;
#pragma unroll
    for (int off = 16; off > 0; off /= 2) {
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
        sum += __shfl_xor_sync(0xffffffffu, sum, off);
    }
    const float d = amax / 127.0f;
    q[i] = int8_level(v, d);
    if (threadIdx.x % 32 == 0) ds[i / kGroup] = make_float2(d, sum);
}

// A unit's activations: 16 at lo and 16 at hi (offsets in the block), as int8
// words, with the scale and sum of each one's group of 32.
struct UnitAct {
    int lo[4], hi[4];
    float2 ds_lo, ds_hi;
};

// Q4_K: a 16-byte header (d and dmin as halves; 12 bytes of 6-bit scales and
// mins, 8 of each) and 128 bytes of quants; w = d * scale_s * q - dmin * min_s
// in sub-block s of 32. Unit j is quants word j: g = j / 2, its low nibbles are
// weights 64g + 16(j % 2) + 0..15 (sub-block 2g), its high nibbles the 16 that
// lie 32 further (sub-block 2g + 1).
struct Q4K {
    static constexpr int kBlockWords = 9;
    struct Unit {
        uint4 header, q;
    };
    __device__ static Unit load(const uint4* block, int j) {
        return {load_stream(block), load_stream(block + 1 + j)};
    }
    __device__ static int act_lo(int j) { return 64 * (j / 2) + 16 * (j % 2); }
    __device__ static int act_hi(int j) { return act_lo(j) + 32; }

    // The scales and mins of sub-blocks 2g and 2g + 1 without indexing a
    // register array by g. Sub-block s < 4: scale = byte s & 63, min = byte s + 4
    // & 63; s >= 4: the low 4 bits from byte s + 4 (scale: its low nibble, min:
    // its high one) and the top 2 from bits 6-7 of byte s - 4 (scale) or byte s
    // (min). A pair's two bytes sit in one 16-bit half of each header word.
    __device__ static void scales(const uint4& header, int g, float (&sc)[2], float (&m)[2]) {
        const int shift = 16 * (g % 2);
        const uint32_t a = header.y >> shift, b = header.z >> shift, c = header.w >> shift;
        const uint32_t sc_pair = g < 2 ? a & 0x3f3fu : (c & 0x0f0fu) | ((a >> 2) & 0x3030u);
        const uint32_t m_pair = g < 2 ? b & 0x3f3fu : ((c >> 4) & 0x0f0fu) | ((b >> 2) & 0x3030u);
        sc[0] = float(sc_pair & 0xffu), sc[1] = float((sc_pair >> 8) & 0xffu);
        m[0] = float(m_pair & 0xffu), m[1] = float((m_pair >> 8) & 0xffu);
    }

    __device__ static float dot(const Unit& u, int j, const UnitAct& x) {
        float sc[2], m[2];
        scales(u.header, j / 2, sc, m);
        const float2 dm = __half22float2(*reinterpret_cast<const __half2*>(&u.header.x));
        const uint32_t q[4] = {u.q.x, u.q.y, u.q.z, u.q.w};
        int dot_lo = 0, dot_hi = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            dot_lo = __dp4a(int(q[i] & 0x0f0f0f0fu), x.lo[i], dot_lo);
            dot_hi = __dp4a(int((q[i] >> 4) & 0x0f0f0f0fu), x.hi[i], dot_hi);
        }
        // The two units of a sub-block pair (j even and odd) share its groups:
        // the even one adds the mins' term, over each whole group.
        const float mins = j % 2 == 0 ? m[0] * x.ds_lo.y + m[1] * x.ds_hi.y : 0.0f;
        return dm.x * (sc[0] * x.ds_lo.x * float(dot_lo) + sc[1] * x.ds_hi.x * float(dot_hi)) - dm.y * mins;
    }
};

// Q6_K (padded to 224 bytes): ql[128] (low 4 bits), qh[64] (top 2 bits),
// int8 scales[16], d; w = d * scale_(i/16) * (q - 32). Weight i = 128h + 32k + l
// has nibble k/2 of ql[64h + 32(k%2) + l] and bits 2k..2k+1 of qh[32h + l].
// Unit j is ql word j: h = j / 4, c = (j / 2) % 2, l = 16(j % 2)..+15; its low
// nibbles are k = c, its high nibbles k = c + 2 (64 weights further), and the
// top bits of both are in qh word 2h + j % 2.
struct Q6K {
    static constexpr int kBlockWords = 14;
    struct Unit {
        uint4 ql, qh, scales;
        uint32_t d;  // the half in its low 16 bits
    };
    __device__ static Unit load(const uint4* block, int j) {
        return {load_stream(block + j), load_stream(block + 8 + 2 * (j / 4) + j % 2), load_stream(block + 12),
                load_stream(block + 13).x};
    }
    __device__ static int act_lo(int j) { return 128 * (j / 4) + 32 * ((j / 2) % 2) + 16 * (j % 2); }
    __device__ static int act_hi(int j) { return act_lo(j) + 64; }

    __device__ static float dot(const Unit& u, int j, const UnitAct& x) {
        const int h = j / 4, c = (j / 2) % 2;
        // Scales 8h + 2c + j % 2 (low nibbles) and 4 further (high): byte 2c + j % 2 of
        // scale word 2h and 2h + 1.
        const int shift = 8 * (2 * c + j % 2);
        const float sc_lo = float(int8_t((h ? u.scales.z : u.scales.x) >> shift));
        const float sc_hi = float(int8_t((h ? u.scales.w : u.scales.y) >> shift));
        const uint32_t ql[4] = {u.ql.x, u.ql.y, u.ql.z, u.ql.w}, qh[4] = {u.qh.x, u.qh.y, u.qh.z, u.qh.w};
        // Levels 0..63 against the activations, less 32 times their sum: q - 32 exactly.
        int dot_lo = 0, dot_hi = 0, sum_lo = 0, sum_hi = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint32_t lo = (ql[i] & 0x0f0f0f0fu) | (((qh[i] >> (2 * c)) & 0x03030303u) << 4);
            const uint32_t hi = ((ql[i] >> 4) & 0x0f0f0f0fu) | (((qh[i] >> (2 * c + 4)) & 0x03030303u) << 4);
            dot_lo = __dp4a(int(lo), x.lo[i], dot_lo);
            dot_hi = __dp4a(int(hi), x.hi[i], dot_hi);
            sum_lo = __dp4a(0x01010101, x.lo[i], sum_lo);
            sum_hi = __dp4a(0x01010101, x.hi[i], sum_hi);
        }
        const float d = __half2float(__ushort_as_half(uint16_t(u.d)));
        return d * (sc_lo * x.ds_lo.x * float(dot_lo - 32 * sum_lo) + sc_hi * x.ds_hi.x * float(dot_hi - 32 * sum_hi));
    }
};

// Q8_0x8 (Q8_0 regrouped at upload): 8 fp16 scales, then 8 blocks of 32 int8
// quants; w = d_j * q in block j. Unit j is block j, two quant words, all in
// one group of activations.
struct Q8x8 {
    static constexpr int kBlockWords = 17;
    struct Unit {
        uint4 scales, q0, q1;
    };
    __device__ static Unit load(const uint4* block, int j) {
        return {load_stream(block), load_stream(block + 1 + 2 * j), load_stream(block + 2 + 2 * j)};
    }
    __device__ static int act_lo(int j) { return 32 * j; }
    __device__ static int act_hi(int j) { return 32 * j + 16; }

    __device__ static float dot(const Unit& u, int j, const UnitAct& x) {
        const uint32_t pair = j < 4 ? (j < 2 ? u.scales.x : u.scales.y) : (j < 6 ? u.scales.z : u.scales.w);
        const float d = __half2float(__ushort_as_half(uint16_t(pair >> (16 * (j % 2)))));
        const uint32_t q[8] = {u.q0.x, u.q0.y, u.q0.z, u.q0.w, u.q1.x, u.q1.y, u.q1.z, u.q1.w};
        int dot = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            dot = __dp4a(int(q[i]), x.lo[i], dot);
            dot = __dp4a(int(q[4 + i]), x.hi[i], dot);
        }
        return d * x.ds_lo.x * float(dot);
    }
};

// Features a warp by row count: every activation word a lane loads serves them
// all, so more rows want more. At one row the next unit's loads are issued
// before this one's are used: a row of 4,096 is only 128 units, four a lane.
template <int Rows>
struct Int8Tiling {
    static constexpr int features() { return Rows <= 2 ? 2 : 4; }
    static constexpr bool prefetch() { return Rows == 1; }
};

template <class Fmt, int Rows, int F = Int8Tiling<Rows>::features(), bool kPrefetch = Int8Tiling<Rows>::prefetch()>
__global__ void __launch_bounds__(kWarps * 32)
    int8_gemv_kernel(Int8Act act, int32_t k, const __grid_constant__ GemvSegments segs) {
    using Unit = typename Fmt::Unit;
    const int seg = gemv_segment(segs);
    const int32_t n = segs.n[seg];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int32_t f0 = ((int32_t(blockIdx.x) - segs.first_block[seg]) * kWarps + warp) * F;
    const int32_t blocks = k / kBlockElems, units = blocks * kUnits, groups = k / kGroup;
    const uint4* rows[F];
#pragma unroll
    for (int f = 0; f < F; ++f) rows[f] = segs.w[seg] + size_t(min(f0 + f, n - 1)) * size_t(blocks) * Fmt::kBlockWords;

    auto load = [&](int32_t c, Unit (&u)[F]) {
#pragma unroll
        for (int f = 0; f < F; ++f) u[f] = c < units ? Fmt::load(rows[f] + (c / kUnits) * Fmt::kBlockWords, c % kUnits) : Unit{};
    };
    // The first unit of weights is loaded before the wait (pdl.cuh): it is in
    // flight while the kernels before this one finish.
    Unit u[F];
    if (f0 < n) load(lane, u);
    pdl_wait();
    if (f0 >= n) return;  // the whole warp

    float acc[Rows][F] = {};

    for (int32_t c = lane; c < units; c += 32) {
        Unit next[F];
        if constexpr (kPrefetch)
            load(c + 32, next);
        else if (c != lane)  // the first unit is loaded above
            load(c, u);
        const int j = c % kUnits;
        const int32_t block_start = (c / kUnits) * kBlockElems;
        const int32_t lo = block_start + Fmt::act_lo(j), hi = block_start + Fmt::act_hi(j);
#pragma unroll
        for (int r = 0; r < Rows; ++r) {
            const int8_t* xr = act.q + size_t(r) * size_t(k);
            const float2* dsr = act.ds + size_t(r) * size_t(groups);
            const uint4 xlo = __ldg(reinterpret_cast<const uint4*>(xr + lo));
            const uint4 xhi = __ldg(reinterpret_cast<const uint4*>(xr + hi));
            const UnitAct x{{int(xlo.x), int(xlo.y), int(xlo.z), int(xlo.w)},
                            {int(xhi.x), int(xhi.y), int(xhi.z), int(xhi.w)},
                            __ldg(dsr + lo / kGroup),
                            __ldg(dsr + hi / kGroup)};
#pragma unroll
            for (int f = 0; f < F; ++f) acc[r][f] += Fmt::dot(u[f], j, x);
        }
        if constexpr (kPrefetch)
#pragma unroll
            for (int f = 0; f < F; ++f) u[f] = next[f];
    }

    store_warp_sums(acc, lane, f0, n, 1.0f, segs.out[seg]);
}

template <class Fmt, int Rows, int F = Int8Tiling<Rows>::features(), bool Prefetch = Int8Tiling<Rows>::prefetch()>
void int8_gemv(const void* act, int32_t k, const GemvTarget* targets, int32_t count, cudaStream_t stream) {
    int32_t blocks = 0;
    const GemvSegments segs = gemv_segments(targets, count, nullptr, kWarps * F, blocks);
    launch_pdl(int8_gemv_kernel<Fmt, Rows, F, Prefetch>, unsigned(blocks), kWarps * 32, 0, stream,
               int8_act_parts(const_cast<void*>(act), Rows, k), k, segs);
}

// One instantiation per row count, so that the accumulators stay in registers.
template <class Fmt>
void int8_gemv_rows(const void* act, int32_t rows, int32_t k, const GemvTarget* targets, int32_t count,
                    cudaStream_t stream) {
    switch (rows) {
        case 1: int8_gemv<Fmt, 1>(act, k, targets, count, stream); break;
        case 2: int8_gemv<Fmt, 2>(act, k, targets, count, stream); break;
        case 3: int8_gemv<Fmt, 3>(act, k, targets, count, stream); break;
        case 4: int8_gemv<Fmt, 4>(act, k, targets, count, stream); break;
        case 5: int8_gemv<Fmt, 5>(act, k, targets, count, stream); break;
        case 6: int8_gemv<Fmt, 6>(act, k, targets, count, stream); break;
        case 7: int8_gemv<Fmt, 7>(act, k, targets, count, stream); break;
        case 8: int8_gemv<Fmt, 8>(act, k, targets, count, stream); break;
        default: throw std::invalid_argument("int8 gemv: rows must be 1..kQuantGemvMaxRows");
    }
}

void check_k(int32_t k) {
    if (k <= 0 || k % kBlockElems) throw std::invalid_argument("int8 gemv: k must be a positive multiple of 256");
}

}  // namespace

size_t int8_act_bytes(int32_t rows, int32_t k) {
    return (size_t(rows) * size_t(k) + 15) / 16 * 16 + size_t(rows) * size_t(k / kGroup) * sizeof(float2);
}

void launch_quantize_int8(const float* x, int32_t rows, int32_t k, void* act, cudaStream_t stream) {
    if (k % kGroup) throw std::invalid_argument("quantize_int8: k must be a multiple of 32");
    const int64_t count = int64_t(rows) * k;
    if (count == 0) return;
    const Int8Act out = int8_act_parts(act, rows, k);
    launch_pdl(quantize_int8_kernel, unsigned((count + 127) / 128), 128, 0, stream, x, count, out.q, out.ds);
    CUDA_CHECK_LAUNCH();
}

bool int8_gemv_takes(QType t) { return t == QType::Q4_K || t == QType::Q6_K || t == QType::Q8_0x8; }

void launch_int8_gemv_group(QType t, const void* act, int32_t rows, int32_t k, const GemvTarget* targets,
                            int32_t count, cudaStream_t stream) {
    if (rows == 0 || count == 0) return;
    if (count > kGemvMaxSegments) throw std::invalid_argument("int8 gemv: at most kGemvMaxSegments matrices a launch");
    check_k(k);
    for (int32_t i = 0; i < count; ++i)
        if (targets[i].n <= 0) throw std::invalid_argument("int8 gemv: every matrix needs rows");
    switch (t) {
        case QType::Q4_K: int8_gemv_rows<Q4K>(act, rows, k, targets, count, stream); break;
        case QType::Q6_K: int8_gemv_rows<Q6K>(act, rows, k, targets, count, stream); break;
        case QType::Q8_0x8: int8_gemv_rows<Q8x8>(act, rows, k, targets, count, stream); break;
        default: throw std::invalid_argument("int8 gemv: only Q4_K, Q6_K and Q8_0x8 weights");
    }
    CUDA_CHECK_LAUNCH();
}

bool launch_int8_gemv_variant(QType t, int features, bool prefetch, const void* act, int32_t k, const void* w,
                              int32_t n, float* out, cudaStream_t stream) {
    check_k(k);
    const GemvTarget target{w, n, out};
    auto variant = [&](auto fmt) {
        using Fmt = decltype(fmt);
        switch (features * 10 + int(prefetch)) {
            case 10: int8_gemv<Fmt, 1, 1, false>(act, k, &target, 1, stream); return true;
            case 11: int8_gemv<Fmt, 1, 1, true>(act, k, &target, 1, stream); return true;
            case 20: int8_gemv<Fmt, 1, 2, false>(act, k, &target, 1, stream); return true;
            case 21: int8_gemv<Fmt, 1, 2, true>(act, k, &target, 1, stream); return true;
            case 40: int8_gemv<Fmt, 1, 4, false>(act, k, &target, 1, stream); return true;
            case 41: int8_gemv<Fmt, 1, 4, true>(act, k, &target, 1, stream); return true;
            default: return false;
        }
    };
    switch (t) {
        case QType::Q4_K: return variant(Q4K{});
        case QType::Q6_K: return variant(Q6K{});
        case QType::Q8_0x8: return variant(Q8x8{});
        default: return false;
    }
}

}  // namespace minfer::cuda
