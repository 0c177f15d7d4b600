// The AVX-512 tiles of panels.h: RM activation rows x NP panels of 16 weight
// rows, the same bits as panel_dot_spec. Lane l of every vector is weight row
// l of its panel, so a block's integer sums need no horizontal adds: each
// vpdpbusd multiplies 4 weight bytes of 16 rows by the same 4 activation bytes
// and adds them to that row's lane.
#include "kernels/cpu/vec_dot_detail.h"

#include <utility>

#include "kernels/formats/quant.h"

#if MINFER_AVX512

namespace minfer::cpu {

using vec_dot_detail::load;

namespace {

#define UNROLL _Pragma("GCC unroll 16")

template <GGMLType kType, int RM, int NP>
void panel_tile(const PanelMatrix& w, int64_t p0, const uint8_t* act, size_t act_stride, float* out, int64_t ldo) {
    constexpr bool kMin = kType == GGMLType::Q4_1;
    constexpr int32_t kOffset = kType == GGMLType::Q8_0 ? 128 : kType == GGMLType::Q4_0 ? 8 : 0;
    // One row's integer sums wait on each other (vpdpbusd's latency): a decode
    // tile keeps two partial sums a block, added at the end (exact).
    constexpr int kParts = RM == 1 ? 2 : 1;
    const size_t quants = (kMin ? 2 : 1) * w.scale_bytes;
    const uint8_t* base[NP];
    UNROLL for (int j = 0; j < NP; ++j) base[j] = w.panel(p0 + j);
    const ActQ8Block* x[RM];
    UNROLL for (int i = 0; i < RM; ++i)
        x[i] = reinterpret_cast<const ActQ8Block*>(act + i * act_stride);

    __m512 acc[RM][NP];
    UNROLL for (int i = 0; i < RM; ++i)
        UNROLL for (int j = 0; j < NP; ++j) acc[i][j] = _mm512_setzero_ps();

    for (int64_t b = 0; b < w.blocks; ++b) {
        __m512i sum[RM][NP][kParts];
        UNROLL for (int i = 0; i < RM; ++i) {
            const __m512i init = kOffset ? _mm512_set1_epi32(-kOffset * x[i][b].sum) : _mm512_setzero_si512();
            UNROLL for (int j = 0; j < NP; ++j) {
                sum[i][j][0] = init;
                if constexpr (kParts > 1) sum[i][j][1] = _mm512_setzero_si512();
            }
        }
        const uint8_t* q[NP];
        UNROLL for (int j = 0; j < NP; ++j) q[j] = base[j] + quants + size_t(b) * w.quant_bytes;
        // Vector g (0..7) of the block: elements 4g..4g+3 of each row.
        auto madd = [&](int g, const __m512i* wv) {
            UNROLL for (int i = 0; i < RM; ++i) {
                const __m512i xb = _mm512_set1_epi32(load<int32_t>(reinterpret_cast<const uint8_t*>(x[i][b].qs) + 4 * g));
                UNROLL for (int j = 0; j < NP; ++j)
                    sum[i][j][g % kParts] = _mm512_dpbusd_epi32(sum[i][j][g % kParts], wv[j], xb);
            }
        };
        if constexpr (kType == GGMLType::Q8_0) {
            UNROLL for (int g = 0; g < 8; ++g) {
                __m512i wv[NP];
                UNROLL for (int j = 0; j < NP; ++j) wv[j] = _mm512_load_si512(q[j] + 64 * g);
                madd(g, wv);
            }
        } else {
            const __m512i low4 = _mm512_set1_epi8(0x0F);
            UNROLL for (int h = 0; h < 4; ++h) {
                __m512i lo[NP], hi[NP];
                UNROLL for (int j = 0; j < NP; ++j) {
                    const __m512i v = _mm512_load_si512(q[j] + 64 * h);
                    lo[j] = _mm512_and_si512(v, low4);
                    hi[j] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
                }
                madd(2 * h, lo);
                madd(2 * h + 1, hi);
            }
        }
        __m512 d[NP], m[NP];
        UNROLL for (int j = 0; j < NP; ++j) {
            d[j] = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(base[j] + 32 * b)));
            if constexpr (kMin)
                m[j] = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(base[j] + w.scale_bytes + 32 * b)));
        }
        UNROLL for (int i = 0; i < RM; ++i) {
            const __m512 xd = _mm512_set1_ps(x[i][b].d);
            UNROLL for (int j = 0; j < NP; ++j) {
                __m512i s = sum[i][j][0];
                if constexpr (kParts > 1) s = _mm512_add_epi32(s, sum[i][j][1]);
                acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(d[j], xd), acc[i][j]);
                if constexpr (kMin) acc[i][j] = _mm512_fmadd_ps(m[j], _mm512_set1_ps(x[i][b].dsum), acc[i][j]);
            }
        }
    }
    UNROLL for (int i = 0; i < RM; ++i)
        UNROLL for (int j = 0; j < NP; ++j) _mm512_storeu_ps(out + i * ldo + 16 * j, acc[i][j]);
}

// Q4_K: per sub-block the same vpdpbusd sums as Q4_0's, multiplied by the
// sub-block's scale (vpmulld) into the super-block's exact sum; the mins meet
// the activation's sub-block sums two at a time (vpmaddwd).
template <int RM, int NP>
void panel_tile_q4k(const PanelMatrix& w, int64_t p0, const uint8_t* act, size_t act_stride, float* out, int64_t ldo) {
    constexpr int kParts = RM == 1 ? 2 : 1;
    const uint8_t* base[NP];
    UNROLL for (int j = 0; j < NP; ++j) base[j] = w.panel(p0 + j);
    const BlockQ8_K* x[RM];
    UNROLL for (int i = 0; i < RM; ++i) x[i] = reinterpret_cast<const BlockQ8_K*>(act + i * act_stride);
    const __m512i low4 = _mm512_set1_epi8(0x0F);

    __m512 acc[RM][NP];
    UNROLL for (int i = 0; i < RM; ++i)
        UNROLL for (int j = 0; j < NP; ++j) acc[i][j] = _mm512_setzero_ps();

    for (int64_t b = 0; b < w.blocks; ++b) {
        const uint8_t* blk[NP];
        UNROLL for (int j = 0; j < NP; ++j) blk[j] = base[j] + w.scale_bytes + size_t(b) * w.quant_bytes;
        __m512i total[RM][NP];
        UNROLL for (int i = 0; i < RM; ++i)
            UNROLL for (int j = 0; j < NP; ++j) total[i][j] = _mm512_setzero_si512();
        for (int s = 0; s < 8; ++s) {
            __m512i sum[RM][NP][kParts];
            UNROLL for (int i = 0; i < RM; ++i)
                UNROLL for (int j = 0; j < NP; ++j)
                    UNROLL for (int k = 0; k < kParts; ++k) sum[i][j][k] = _mm512_setzero_si512();
            UNROLL for (int h = 0; h < 4; ++h) {
                __m512i lo[NP], hi[NP];
                UNROLL for (int j = 0; j < NP; ++j) {
                    const __m512i v = _mm512_load_si512(blk[j] + 384 + 256 * s + 64 * h);
                    lo[j] = _mm512_and_si512(v, low4);
                    hi[j] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
                }
                UNROLL for (int i = 0; i < RM; ++i) {
                    const int8_t* qs = x[i][b].qs + 32 * s + 8 * h;
                    const __m512i xl = _mm512_set1_epi32(load<int32_t>(reinterpret_cast<const uint8_t*>(qs)));
                    const __m512i xh = _mm512_set1_epi32(load<int32_t>(reinterpret_cast<const uint8_t*>(qs + 4)));
                    UNROLL for (int j = 0; j < NP; ++j) {
                        sum[i][j][0] = _mm512_dpbusd_epi32(sum[i][j][0], lo[j], xl);
                        sum[i][j][kParts - 1] = _mm512_dpbusd_epi32(sum[i][j][kParts - 1], hi[j], xh);
                    }
                }
            }
            UNROLL for (int j = 0; j < NP; ++j) {
                const __m512i sc = _mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(blk[j] + 16 * s)));
                UNROLL for (int i = 0; i < RM; ++i) {
                    __m512i t = sum[i][j][0];
                    if constexpr (kParts > 1) t = _mm512_add_epi32(t, sum[i][j][1]);
                    total[i][j] = _mm512_add_epi32(total[i][j], _mm512_mullo_epi32(t, sc));
                }
            }
        }
        UNROLL for (int i = 0; i < RM; ++i) {
            const BlockQ8_K& a = x[i][b];
            __m512i pairs[4];  // (sum of sub-block 2k, of 2k + 1) as int16 pairs
            UNROLL for (int k = 0; k < 4; ++k)
                pairs[k] = _mm512_set1_epi32(int32_t(uint16_t(int16_t(a.bsums[4 * k] + a.bsums[4 * k + 1]))) |
                                             int32_t(uint32_t(uint16_t(int16_t(a.bsums[4 * k + 2] + a.bsums[4 * k + 3]))) << 16));
            const __m512 xd = _mm512_set1_ps(a.d);
            UNROLL for (int j = 0; j < NP; ++j) {
                __m512i m = _mm512_setzero_si512();
                UNROLL for (int k = 0; k < 4; ++k)
                    m = _mm512_add_epi32(m, _mm512_madd_epi16(_mm512_load_si512(blk[j] + 128 + 64 * k), pairs[k]));
                const __m512 d = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(base[j] + 64 * b)));
                const __m512 dmin = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(base[j] + 64 * b + 32)));
                const __m512 t = _mm512_fmsub_ps(_mm512_cvtepi32_ps(total[i][j]), d, _mm512_mul_ps(_mm512_cvtepi32_ps(m), dmin));
                acc[i][j] = _mm512_fmadd_ps(t, xd, acc[i][j]);
            }
        }
    }
    UNROLL for (int i = 0; i < RM; ++i)
        UNROLL for (int j = 0; j < NP; ++j) _mm512_storeu_ps(out + i * ldo + 16 * j, acc[i][j]);
}

#undef UNROLL

// The tile shapes: several activation rows share each weight vector loaded;
// a decode row takes more panels at once instead, for independent sums.
constexpr PanelTileShape kRows{4, 2}, kOneRow{1, 4};

template <GGMLType kType, int RM, int NP>
constexpr PanelTileFn tile_of() {
    if constexpr (kType == GGMLType::Q4_K) return &panel_tile_q4k<RM, NP>;
    else return &panel_tile<kType, RM, NP>;
}

template <GGMLType kType>
struct PanelTable {
    PanelTileFn rows[kRows.rm][kRows.np];
    PanelTileFn one_row[kOneRow.np];
    template <int... I, int... J>
    constexpr PanelTable(std::integer_sequence<int, I...>, std::integer_sequence<int, J...>) : rows{}, one_row{} {
        ((rows[I / kRows.np][I % kRows.np] = tile_of<kType, I / kRows.np + 1, I % kRows.np + 1>()), ...);
        ((one_row[J] = tile_of<kType, 1, J + 1>()), ...);
    }
    constexpr PanelTable()
        : PanelTable(std::make_integer_sequence<int, kRows.rm * kRows.np>{}, std::make_integer_sequence<int, kOneRow.np>{}) {}
};

template <GGMLType kType>
PanelTileFn pick(int rm, int np, bool one_row, PanelTileShape* shape) {
    static constexpr PanelTable<kType> table;
    if (shape) *shape = one_row ? kOneRow : kRows;
    if (one_row) return rm == 1 && np >= 1 && np <= kOneRow.np ? table.one_row[np - 1] : nullptr;
    return rm >= 1 && rm <= kRows.rm && np >= 1 && np <= kRows.np ? table.rows[rm - 1][np - 1] : nullptr;
}

}  // namespace

PanelTileFn vec_dot_detail::avx512_panel_lookup(GGMLType t, int rm, int np, bool one_row, PanelTileShape* shape) {
    switch (t) {
        case GGMLType::Q8_0: return pick<GGMLType::Q8_0>(rm, np, one_row, shape);
        case GGMLType::Q4_0: return pick<GGMLType::Q4_0>(rm, np, one_row, shape);
        case GGMLType::Q4_1: return pick<GGMLType::Q4_1>(rm, np, one_row, shape);
        case GGMLType::Q4_K: return pick<GGMLType::Q4_K>(rm, np, one_row, shape);
        default: return nullptr;
    }
}

}  // namespace minfer::cpu

#endif  // MINFER_AVX512
