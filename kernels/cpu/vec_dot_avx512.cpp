// The AVX-512 tile kernels of the CPU dot products (namespace simd): the same
// bits as vec_dot.cpp's plain C++ spec, computed RM x RN dot products at a
// time. The arithmetic they follow is described at the top of vec_dot.cpp.
#include "kernels/cpu/vec_dot_detail.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels/formats/quant.h"

#if MINFER_AVX512

namespace minfer::cpu {

using vec_dot_detail::f16;
using vec_dot_detail::load;

// ---- AVX-512 tiles ----------------------------------------------------------------
//
// tile<T, RM, RN> keeps RM x RN accumulators in registers. Each step loads
// (and decodes) one piece of each of the RN weight rows once and uses it for
// all RM activation rows: RM + RN loads feed RM x RN multiply-adds. A type T
// says what a step is:
//   steps(n)              number of steps along K
//   block(w, s, n)        per weight row and step: scales, tail mask...
//   chunk(w, block, s, c) per weight row and sub-step c < kChunks: the vector
//   madd(acc, chunk, x, s, c)   the multiply-add of one activation row
//   end_block(acc, block, x, s) per step: apply the block's float scales
//   result(acc)           the 16 lanes to sum

namespace simd {
namespace {

// The tree of spec::hsum for four vectors at once, in registers: each level
// pairs every live lane with its partner (a blend and one shuffle bring the
// partners together) and packs two vectors' results into one.
// Returns [hsum(a), hsum(b), hsum(c), hsum(d)] bit for bit.
inline __m128 hsum4(__m512 a, __m512 b, __m512 c, __m512 d) {
    // l + l+8: [a's 8 | b's 8], [c's 8 | d's 8]
    const __m512 ab = _mm512_add_ps(_mm512_mask_blend_ps(0xFF00, a, b), _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 3, 2)));
    const __m512 cd = _mm512_add_ps(_mm512_mask_blend_ps(0xFF00, c, d), _mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(1, 0, 3, 2)));
    // l + l+4: one vector per 128-bit lane, [a's 4 | c's 4 | b's 4 | d's 4]
    const __m512i partner = _mm512_setr_epi32(4, 5, 6, 7, 16, 17, 18, 19, 12, 13, 14, 15, 24, 25, 26, 27);
    __m512 v = _mm512_add_ps(_mm512_mask_blend_ps(0xF0F0, ab, cd), _mm512_permutex2var_ps(ab, partner, cd));
    v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));  // l + l+2
    v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));  // l + l+1
    return _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_setr_epi32(0, 8, 4, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), v));
}

// Two f16 scales spread over lanes 0-7 and 8-15.
inline __m512 two_scales(uint16_t d0, uint16_t d1) {
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16(short(d0))),
                                                   _mm_set1_epi16(short(d1)), 1));
}

inline __m512i lo_hi_nibbles(__m256i v) {  // [v & 15 | v >> 4]
    return _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(v), _mm256_srli_epi16(v, 4), 1),
                            _mm512_set1_epi8(0x0F));
}

// ---- F32, F16, BF16 -------------------------------------------------------------

template <GGMLType kType>
struct FloatRows {
    static constexpr int kRM = 6, kRN = 4, kChunks = 1;
    using Acc = __m512;
    using Chunk = __m512;
    struct Block {
        __mmask16 mask;  // elements left in this step
    };
    static constexpr size_t kElemBytes = kType == GGMLType::F32 ? 4 : 2;
    static constexpr size_t kStepBytes = 16 * kElemBytes;

    static Acc zero() { return _mm512_setzero_ps(); }
    static int64_t steps(int64_t n) { return (n + 15) / 16; }
    static Block block(const uint8_t*, int64_t s, int64_t n) {
        const int64_t left = n - 16 * s;
        return {__mmask16(left >= 16 ? 0xFFFF : (1u << left) - 1)};
    }
    static __m512 chunk(const uint8_t* w, Block b, int64_t s, int) {
        const uint8_t* p = w + 16 * s * kElemBytes;
        if constexpr (kType == GGMLType::F32) {
            return b.mask == 0xFFFF ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(b.mask, p);
        } else {
            const __m256i h = b.mask == 0xFFFF ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))
                                                : _mm256_maskz_loadu_epi16(b.mask, p);
            if constexpr (kType == GGMLType::F16) return _mm512_cvtph_ps(h);
            // bf16 is the top half of a float.
            return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
        }
    }
    static void madd(Acc& acc, __m512 w, const uint8_t* x, int64_t s, int) {
        acc = _mm512_fmadd_ps(w, _mm512_loadu_ps(reinterpret_cast<const float*>(x) + 16 * s), acc);
    }
    static void end_block(Acc&, Block, const uint8_t*, int64_t) {}
    static __m512 result(Acc a) { return a; }
};

// ---- 32-blocks: Q5_0, Q5_1 (Q8_0 and Q4_x: panels_avx512.cpp) -----------------------

template <GGMLType kType>
struct Q32Rows {
    static constexpr int kRM = 4, kRN = 4, kChunks = 1;
    static constexpr bool kMin = kType == GGMLType::Q5_1;
    // Block layout: f16 d, [f16 m], u32 qh, qs.
    static constexpr size_t kQh = kMin ? 4 : 2;
    static constexpr size_t kQs = kQh + 4;
    static constexpr size_t kBytes = kQs + 16;
    static constexpr size_t kStepBytes = 2 * kBytes;
    // offset = 1 << kShift (see q32_offset); 0 for the types with a min.
    static constexpr int kShift = kType == GGMLType::Q5_0 ? 4 : 0;
    using Acc = __m512;
    struct Block {
        bool pair;  // false: the row's last, odd block
    };
    struct Chunk {
        __m512i q;  // 64 unsigned quants
        __m512 d, m;
    };

    static Acc zero() { return _mm512_setzero_ps(); }
    static int64_t steps(int64_t n) { return (n / 32 + 1) / 2; }
    static Block block(const uint8_t*, int64_t s, int64_t n) { return {2 * s + 1 < n / 32}; }
    static Chunk chunk(const uint8_t* w, Block b, int64_t s, int) {
        const uint8_t* p0 = w + 2 * s * kBytes;
        const uint8_t* p1 = p0 + kBytes;  // read only if b.pair
        Chunk c;
        c.d = two_scales(load<uint16_t>(p0), b.pair ? load<uint16_t>(p1) : 0);
        if constexpr (kMin) c.m = two_scales(load<uint16_t>(p0 + 2), b.pair ? load<uint16_t>(p1 + 2) : 0);
        // [blk0 qs | blk1 qs] -> nibbles [blk0 lo | blk1 lo | blk0 hi | blk1 hi] -> block order.
        const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p0 + kQs));
        const __m128i q1 = b.pair ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(p1 + kQs)) : _mm_setzero_si128();
        const __m512i z = lo_hi_nibbles(_mm256_inserti128_si256(_mm256_castsi128_si256(q0), q1, 1));
        c.q = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));
        // bit j of qh: the 5th bit of weight j
        const uint64_t qh = load<uint32_t>(p0 + kQh) | (b.pair ? uint64_t(load<uint32_t>(p1 + kQh)) << 32 : 0);
        c.q = _mm512_or_si512(c.q, _mm512_maskz_mov_epi8(__mmask64(qh), _mm512_set1_epi8(16)));
        return c;
    }
    static void madd(Acc& acc, const Chunk& c, const uint8_t* x, int64_t s, int) {
        const ActQ8Pair& a = reinterpret_cast<const ActQ8Pair*>(x)[s];
        const __m512 xd = _mm512_loadu_ps(a.d);
        const __m512i nsum = _mm512_loadu_si512(a.nsum);
        // u8 x s8 -> int32 lanes, starting from -offset * sum(x) in lanes 0 and 8.
        const __m512i corr = kShift ? _mm512_slli_epi32(nsum, kShift) : _mm512_setzero_si512();
        const __m512i sum = _mm512_dpbusd_epi32(corr, c.q, _mm512_loadu_si512(a.qs));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(c.d, xd), acc);
        if constexpr (kMin) acc = _mm512_fnmadd_ps(c.m, _mm512_mul_ps(_mm512_cvtepi32_ps(nsum), xd), acc);
    }
    static void end_block(Acc&, Block, const uint8_t*, int64_t) {}
    static __m512 result(Acc a) { return a; }
};

// ---- K-quants: Q4_K, Q5_K, Q6_K ----------------------------------------------------
// A step is a block of 256 in 4 chunks of 64. maddubs makes int16 pairs of
// q * x, dpwssd multiplies them by the sub-block scale into int32 lanes: the
// block's integer sum stays exact until end_block converts it once.

struct KAcc {
    __m512i sum;  // this block's exact integer sums
    __m512 f;     // the float accumulator
};

struct KChunk {
    __m512i q;   // 64 unsigned quants
    __m512i sc;  // the scale of each int16 pair of them
};

// Per chunk c, which of the 8 sub-block scales each int16 lane takes.
inline __m512i q4k_scale_index(int c) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(short(2 * c))), _mm256_set1_epi16(short(2 * c + 1)), 1);
}

template <GGMLType kType>
struct Q45KRows {
    static constexpr int kRM = 6, kRN = 3, kChunks = 4;
    static constexpr bool kFifth = kType == GGMLType::Q5_K;
    using Acc = KAcc;
    using B = std::conditional_t<kFifth, BlockQ5_K, BlockQ4_K>;
    static constexpr size_t kStepBytes = sizeof(B);
    struct Block {
        __m128i sc;    // 8 scales as int16
        __m256i mins;  // m[s] in int16 lanes 2s and 2s+1, against bsums
        __m512i qh;    // Q5_K: the 32 bytes of 5th bits, twice
        float d, dmin;
    };
    using Chunk = KChunk;

    static Acc zero() { return {_mm512_setzero_si512(), _mm512_setzero_ps()}; }
    static int64_t steps(int64_t n) { return n / 256; }
    static Block block(const uint8_t* w, int64_t s, int64_t) {
        const B& b = reinterpret_cast<const B*>(w)[s];
        // Unpack the 6-bit scales and mins (see q4k_scale_min) four at a time:
        // afterwards the bytes of u[0..1] are sc[0..7], of u[2..3] m[0..7].
        uint32_t u[4];
        std::memcpy(u, b.scales, 12);
        const uint32_t m3f = 0x3f3f3f3f, m0f = 0x0f0f0f0f, m03 = 0x03030303;
        u[3] = ((u[2] >> 4) & m0f) | (((u[1] >> 6) & m03) << 4);
        const uint32_t m_lo = u[1] & m3f;
        u[1] = (u[2] & m0f) | (((u[0] >> 6) & m03) << 4);
        u[2] = m_lo;
        u[0] &= m3f;
        const __m128i sm = _mm_setr_epi32(int(u[0]), int(u[1]), int(u[2]), int(u[3]));
        Block blk;
        blk.sc = _mm_cvtepu8_epi16(sm);
        blk.mins = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));
        if constexpr (kFifth) blk.qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh)));
        blk.d = f16(b.d);
        blk.dmin = f16(b.dmin);
        return blk;
    }
    static Chunk chunk(const uint8_t* w, const Block& blk, int64_t s, int c) {
        const B& b = reinterpret_cast<const B*>(w)[s];
        __m512i q = lo_hi_nibbles(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * c)));
        if constexpr (kFifth) {  // bit 2c of qh[l] for the low nibbles, 2c+1 for the high
            const __m512i bit = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi8(char(1 << (2 * c)))),
                                                   _mm256_set1_epi8(char(1 << (2 * c + 1))), 1);
            q = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(blk.qh, bit), q, _mm512_set1_epi8(16));
        }
        return {q, _mm512_permutexvar_epi16(q4k_scale_index(c), _mm512_castsi128_si512(blk.sc))};
    }
    static void madd(Acc& acc, const Chunk& c, const uint8_t* x, int64_t s, int ci) {
        const BlockQ8_K& a = reinterpret_cast<const BlockQ8_K*>(x)[s];
        const __m512i xq = _mm512_loadu_si512(a.qs + 64 * ci);
        acc.sum = _mm512_dpwssd_epi32(acc.sum, _mm512_maddubs_epi16(c.q, xq), c.sc);
    }
    static void end_block(Acc& acc, const Block& blk, const uint8_t* x, int64_t s) {
        const BlockQ8_K& a = reinterpret_cast<const BlockQ8_K*>(x)[s];
        // m[l] * (bsums[2l] + bsums[2l+1]) in lanes 0-7.
        const __m256i mins = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums)), blk.mins);
        const __m512 t = _mm512_fmsub_ps(_mm512_cvtepi32_ps(acc.sum), _mm512_set1_ps(blk.d),
                                         _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_zextsi256_si512(mins)), _mm512_set1_ps(blk.dmin)));
        acc.f = _mm512_fmadd_ps(t, _mm512_set1_ps(a.d), acc.f);
        acc.sum = _mm512_setzero_si512();
    }
    static __m512 result(const Acc& a) { return a.f; }
};

struct Q6KRows {
    static constexpr int kRM = 6, kRN = 3, kChunks = 4;
    static constexpr size_t kStepBytes = sizeof(BlockQ6_K);
    using Acc = KAcc;
    struct Block {
        __m256i sc;  // 16 scales as int16
        float d;
    };
    using Chunk = KChunk;

    static Acc zero() { return {_mm512_setzero_si512(), _mm512_setzero_ps()}; }
    static int64_t steps(int64_t n) { return n / 256; }
    static Block block(const uint8_t* w, int64_t s, int64_t) {
        const BlockQ6_K& b = reinterpret_cast<const BlockQ6_K*>(w)[s];
        return {_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales))), f16(b.d)};
    }
    // Chunk c = 2h + half holds elements 128h + 64half + 0..63: low 4 bits from
    // ql[64h..64h+63] (low nibbles for half 0, high for 1), 2 high bits from
    // qh[32h..32h+31] at bit 4half (first 32) and 4half + 2 (last 32).
    static Chunk chunk(const uint8_t* w, const Block& blk, int64_t s, int c) {
        const BlockQ6_K& b = reinterpret_cast<const BlockQ6_K*>(w)[s];
        const int h = c / 2, half = c % 2;
        __m512i lo = _mm512_loadu_si512(b.ql + 64 * h);
        if (half) lo = _mm512_srli_epi16(lo, 4);
        lo = _mm512_and_si512(lo, _mm512_set1_epi8(0x0F));
        const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h)));
        const __m512i shift = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(short(4 * half))),
                                                 _mm256_set1_epi16(short(4 * half + 2)), 1);
        const __m512i hi = _mm512_and_si512(_mm512_srlv_epi16(qh, shift), _mm512_set1_epi8(3));
        const __m512i q = _mm512_or_si512(lo, _mm512_slli_epi16(hi, 4));
        // int16 lane i (elements 2i, 2i+1) takes the scale of group 4c + i / 8.
        alignas(64) static constexpr int16_t kGroup[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                                           2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
        const __m512i idx = _mm512_add_epi16(_mm512_set1_epi16(short(4 * c)), _mm512_load_si512(kGroup));
        return {q, _mm512_permutexvar_epi16(idx, _mm512_castsi256_si512(blk.sc))};
    }
    static void madd(Acc& acc, const Chunk& c, const uint8_t* x, int64_t s, int ci) {
        const BlockQ8_K& a = reinterpret_cast<const BlockQ8_K*>(x)[s];
        acc.sum = _mm512_dpwssd_epi32(acc.sum, _mm512_maddubs_epi16(c.q, _mm512_loadu_si512(a.qs + 64 * ci)), c.sc);
    }
    static void end_block(Acc& acc, const Block& blk, const uint8_t* x, int64_t s) {
        const BlockQ8_K& a = reinterpret_cast<const BlockQ8_K*>(x)[s];
        // q is unsigned (q - 32 is the weight): subtract 32 * sum of scale * bsums.
        const __m256i corr = _mm256_madd_epi16(blk.sc, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums)));
        const __m512i sum = _mm512_sub_epi32(acc.sum, _mm512_zextsi256_si512(_mm256_slli_epi32(corr, 5)));
        acc.f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(blk.d * a.d), acc.f);
        acc.sum = _mm512_setzero_si512();
    }
    static __m512 result(const Acc& a) { return a.f; }
};

// ---- the tile -------------------------------------------------------------------------

// The accumulators stay in registers only if the loops over the tile's rows
// and columns are fully unrolled; GCC needs to be told.
#define UNROLL _Pragma("GCC unroll 16")

template <class T, int RM, int RN>
void tile(const uint8_t* w, size_t ws, const uint8_t* x, size_t xs, int64_t n, float* out, int64_t ldo) {
    static_assert(RN <= 4);
    typename T::Acc acc[RM][RN];
    UNROLL for (int i = 0; i < RM; ++i)
        UNROLL for (int j = 0; j < RN; ++j) acc[i][j] = T::zero();

    for (int64_t s = 0; s < T::steps(n); ++s) {
        if constexpr (RM == 1) {
            // Decode streams the weights from memory: ask for the next tile's
            // rows (RN rows on, same offset) one tile ahead. With the hardware
            // prefetchers alone, decode was up to 1.5x slower.
            UNROLL for (int j = 0; j < RN; ++j)
                for (size_t b = 0; b < T::kStepBytes; b += 64)
                    _mm_prefetch(reinterpret_cast<const char*>(w + (j + RN) * ws + s * T::kStepBytes + b), _MM_HINT_T0);
        }
        typename T::Block blk[RN];
        UNROLL for (int j = 0; j < RN; ++j) blk[j] = T::block(w + j * ws, s, n);
        UNROLL for (int c = 0; c < T::kChunks; ++c) {
            typename T::Chunk wc[RN];  // loaded once, used by all RM rows
            UNROLL for (int j = 0; j < RN; ++j) wc[j] = T::chunk(w + j * ws, blk[j], s, c);
            UNROLL for (int i = 0; i < RM; ++i)
                UNROLL for (int j = 0; j < RN; ++j) T::madd(acc[i][j], wc[j], x + i * xs, s, c);
        }
        UNROLL for (int i = 0; i < RM; ++i)
            UNROLL for (int j = 0; j < RN; ++j) T::end_block(acc[i][j], blk[j], x + i * xs, s);
    }

    // The horizontal sums, one row of the tile at a time.
    UNROLL for (int i = 0; i < RM; ++i) {
        __m512 v[4] = {};
        UNROLL for (int j = 0; j < RN; ++j) v[j] = T::result(acc[i][j]);
        const __m128 sums = hsum4(v[0], v[1], v[2], v[3]);
        if constexpr (RN == 4)
            _mm_storeu_ps(out + i * ldo, sums);
        else
            _mm_mask_storeu_ps(out + i * ldo, __mmask8((1 << RN) - 1), sums);
    }
}

#undef UNROLL

// fns[rm - 1][rn - 1] = tile<T, rm, rn>.
template <class T>
struct TileTable {
    DotTileFn fns[T::kRM][T::kRN];
    template <int... I>
    constexpr TileTable(std::integer_sequence<int, I...>) : fns{} {
        ((fns[I / T::kRN][I % T::kRN] = &tile<T, I / T::kRN + 1, I % T::kRN + 1>), ...);
    }
    constexpr TileTable() : TileTable(std::make_integer_sequence<int, T::kRM * T::kRN>{}) {}
};

template <class T>
DotTileFn pick(int rm, int rn, TileShape* shape) {
    static constexpr TileTable<T> table;
    if (shape) *shape = {T::kRM, T::kRN};
    return rm >= 1 && rm <= T::kRM && rn >= 1 && rn <= T::kRN ? table.fns[rm - 1][rn - 1] : nullptr;
}

}  // namespace
}  // namespace simd

DotTileFn vec_dot_detail::avx512_lookup(GGMLType t, int rm, int rn, TileShape* shape) {
    using namespace simd;
    switch (t) {
        case GGMLType::F32: return pick<FloatRows<GGMLType::F32>>(rm, rn, shape);
        case GGMLType::F16: return pick<FloatRows<GGMLType::F16>>(rm, rn, shape);
        case GGMLType::BF16: return pick<FloatRows<GGMLType::BF16>>(rm, rn, shape);
        case GGMLType::Q5_0: return pick<Q32Rows<GGMLType::Q5_0>>(rm, rn, shape);
        case GGMLType::Q5_1: return pick<Q32Rows<GGMLType::Q5_1>>(rm, rn, shape);
        case GGMLType::Q5_K: return pick<Q45KRows<GGMLType::Q5_K>>(rm, rn, shape);
        case GGMLType::Q6_K: return pick<Q6KRows>(rm, rn, shape);
        default: throw std::invalid_argument(std::string("dot_tile: no dot product for ") + ggml_type_name(t));
    }
}

}  // namespace minfer::cpu

#endif  // MINFER_AVX512
