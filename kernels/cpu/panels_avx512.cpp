// The AVX-512 tiles of panels.h: RM activation rows x NP panels of 16 weight
// rows, the same bits as panel_dot_spec. Lane l of every vector is weight row
// l of its panel, so a block's integer sums need no horizontal adds: each
// vpdpbusd multiplies 4 weight bytes of 16 rows by the same 4 activation bytes
// and adds them to that row's lane.
#include "kernels/cpu/vec_dot_detail.h"

#include <utility>

#if MINFER_AVX512

namespace minfer::cpu {

using vec_dot_detail::load;

namespace {

#define UNROLL _Pragma("GCC unroll 16")

template <GGMLType kType, int RM, int NP>
void panel_tile(const PanelMatrix& w, int64_t p0, const ActQ8Block* act, size_t act_stride, float* out, int64_t ldo) {
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
        x[i] = reinterpret_cast<const ActQ8Block*>(reinterpret_cast<const uint8_t*>(act) + i * act_stride);

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

#undef UNROLL

// The tile shapes: several activation rows share each weight vector loaded;
// a decode row takes more panels at once instead, for independent sums.
constexpr PanelTileShape kRows{4, 2}, kOneRow{1, 4};

template <GGMLType kType>
struct PanelTable {
    PanelTileFn rows[kRows.rm][kRows.np];
    PanelTileFn one_row[kOneRow.np];
    template <int... I, int... J>
    constexpr PanelTable(std::integer_sequence<int, I...>, std::integer_sequence<int, J...>) : rows{}, one_row{} {
        ((rows[I / kRows.np][I % kRows.np] = &panel_tile<kType, I / kRows.np + 1, I % kRows.np + 1>), ...);
        ((one_row[J] = &panel_tile<kType, 1, J + 1>), ...);
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
        default: return nullptr;
    }
}

}  // namespace minfer::cpu

#endif  // MINFER_AVX512
