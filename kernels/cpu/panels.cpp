// Panels of 16 rows for Q8_0, Q4_0 and Q4_1 (see panels.h): packing,
// activation preparation, the plain C++ statement of the arithmetic and the
// portable tiles. The AVX-512 tiles are in panels_avx512.cpp.
#include "kernels/cpu/panels.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/vec_dot_detail.h"
#include "kernels/formats/quant.h"

namespace minfer::cpu {

using vec_dot_detail::f16;
using vec_dot_detail::load;

bool uses_panels(GGMLType t) {
    return t == GGMLType::Q8_0 || t == GGMLType::Q4_0 || t == GGMLType::Q4_1 || t == GGMLType::Q4_K;
}

namespace {

bool has_min(GGMLType t) { return t == GGMLType::Q4_1; }
int32_t offset(GGMLType t) { return t == GGMLType::Q8_0 ? 128 : t == GGMLType::Q4_0 ? 8 : 0; }
size_t pad64(size_t n) { return (n + 63) / 64 * 64; }

// Unsigned quant e (0..31) of a raw block.
uint8_t raw_quant(GGMLType t, const uint8_t* block, int e) {
    if (t == GGMLType::Q8_0) return uint8_t(int8_t(block[2 + e]) + 128);
    const uint8_t* qs = block + (has_min(t) ? 4 : 2);
    return e < 16 ? qs[e] & 0xF : qs[e - 16] >> 4;
}

}  // namespace

size_t panel_act_bytes(GGMLType t, int64_t n) {
    return t == GGMLType::Q4_K ? act_row_bytes(ActFormat::Q8_K, n) : pad64(size_t(n / 32) * sizeof(ActQ8Block));
}

void prepare_panel_activations(GGMLType t, const float* x, void* out, int64_t n) {
    if (t == GGMLType::Q4_K)
        prepare_activations(ActFormat::Q8_K, x, out, n);
    else
        quantize_act_q8_32(x, static_cast<ActQ8Block*>(out), n);
}

void quantize_act_q8_32(const float* x, ActQ8Block* out, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float* v = x + 32 * b;
        ActQ8Block& a = out[b];
#if MINFER_AVX512
        // The same numbers as the loop below: max and integer sums are exact in
        // any order, and cvtps rounds to nearest even as lrintf does.
        const __m512 lo = _mm512_loadu_ps(v), hi = _mm512_loadu_ps(v + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(lo), _mm512_abs_ps(hi)));
        const float d = amax / 127.0f, inv = d > 0 ? 1.0f / d : 0.0f;
        const __m512i qlo = _mm512_cvtps_epi32(_mm512_mul_ps(lo, _mm512_set1_ps(inv)));
        const __m512i qhi = _mm512_cvtps_epi32(_mm512_mul_ps(hi, _mm512_set1_ps(inv)));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(a.qs), _mm512_cvtsepi32_epi8(qlo));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(a.qs + 16), _mm512_cvtsepi32_epi8(qhi));
        const int32_t sum = _mm512_reduce_add_epi32(_mm512_add_epi32(qlo, qhi));
#else
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(v[j]));
        const float d = amax / 127.0f, inv = d > 0 ? 1.0f / d : 0.0f;
        int32_t sum = 0;
        for (int j = 0; j < 32; ++j) {
            a.qs[j] = int8_t(std::lrintf(v[j] * inv));
            sum += a.qs[j];
        }
#endif
        a.d = d;
        a.sum = sum;
        a.dsum = d * float(sum);
        a.pad = 0;
    }
}

namespace {

// Row r's Q4_K super-blocks into panel `base` (lane l = r % 16).
void pack_q4k_row(const PanelMatrix& m, const uint8_t* row, int64_t l, uint8_t* base) {
    for (int64_t b = 0; b < m.blocks; ++b) {
        const auto& raw = *reinterpret_cast<const BlockQ4_K*>(row + size_t(b) * sizeof(BlockQ4_K));
        auto* dd = reinterpret_cast<uint16_t*>(base + 64 * b);
        dd[l] = raw.d;
        dd[kPanelRows + l] = raw.dmin;
        uint8_t* blk = base + m.scale_bytes + size_t(b) * m.quant_bytes;
        auto* mins = reinterpret_cast<int16_t*>(blk + 128);
        for (int s = 0; s < 8; ++s) {
            uint8_t sc, mn;
            q4k_scale_min(raw.scales, s, sc, mn);
            blk[16 * s + l] = sc;
            mins[2 * (kPanelRows * (s / 2) + l) + s % 2] = mn;
        }
        auto quant = [&](int e) {  // element e of the super-block
            const int c = e / 64, r = e % 64;
            return uint8_t((raw.qs[32 * c + r % 32] >> (r < 32 ? 0 : 4)) & 0xF);
        };
        for (int s = 0; s < 8; ++s) {
            uint8_t* q = blk + 384 + 256 * s + 4 * l;
            for (int h = 0; h < 4; ++h)
                for (int i = 0; i < 4; ++i) q[64 * h + i] = uint8_t(quant(32 * s + 8 * h + i) | quant(32 * s + 8 * h + 4 + i) << 4);
        }
    }
}

}  // namespace

PanelMatrix pack_panels(const MatmulWeight& w) {
    if (!uses_panels(w.type))
        throw std::invalid_argument(std::string("pack_panels: no panels for ") + ggml_type_name(w.type));
    const bool k = w.type == GGMLType::Q4_K;
    const int64_t block = k ? 256 : 32;
    if (w.cols % block) throw std::invalid_argument("pack_panels: the row length is not a multiple of the block");
    PanelMatrix m;
    m.type = w.type;
    m.rows = w.rows;
    m.cols = w.cols;
    m.panels = (w.rows + kPanelRows - 1) / kPanelRows;
    m.blocks = w.cols / block;
    m.scale_bytes = pad64(size_t(m.blocks) * kPanelRows * 2 * (k ? 2 : 1));
    m.quant_bytes = k ? 128 + 256 + 8 * 256 : w.type == GGMLType::Q8_0 ? 8 * 64 : 4 * 64;
    const size_t scale_parts = has_min(w.type) ? 2 : 1;
    m.panel_bytes = scale_parts * m.scale_bytes + size_t(m.blocks) * m.quant_bytes;
    const size_t total = std::max<size_t>(64, size_t(m.panels) * m.panel_bytes);
    m.data = {static_cast<uint8_t*>(std::aligned_alloc(64, total)), std::free};
    if (!m.data) throw std::bad_alloc();
    std::memset(m.data.get(), 0, total);

    const size_t raw_bytes = ggml_row_bytes(w.type, block);
    for (int64_t r = 0; r < w.rows; ++r) {
        const int64_t p = r / kPanelRows, l = r % kPanelRows;
        uint8_t* base = m.data.get() + size_t(p) * m.panel_bytes;
        if (k) {
            pack_q4k_row(m, w.row(r), l, base);
            continue;
        }
        auto* scales = reinterpret_cast<uint16_t*>(base);
        auto* mins = reinterpret_cast<uint16_t*>(base + m.scale_bytes);
        uint8_t* quants = base + scale_parts * m.scale_bytes;
        for (int64_t b = 0; b < m.blocks; ++b) {
            const uint8_t* raw = w.row(r) + size_t(b) * raw_bytes;
            scales[b * kPanelRows + l] = load<uint16_t>(raw);
            if (has_min(w.type)) mins[b * kPanelRows + l] = load<uint16_t>(raw + 2);
            uint8_t* q = quants + size_t(b) * m.quant_bytes + 4 * l;
            if (w.type == GGMLType::Q8_0) {
                for (int e = 0; e < 32; ++e) q[64 * (e / 4) + e % 4] = raw_quant(w.type, raw, e);
            } else {
                for (int h = 0; h < 4; ++h)
                    for (int i = 0; i < 4; ++i)
                        q[64 * h + i] = uint8_t(raw_quant(w.type, raw, 8 * h + i) |
                                                raw_quant(w.type, raw, 8 * h + 4 + i) << 4);
            }
        }
    }
    return m;
}

namespace {

// The nibble of element e (0..31) of a 4-vector group whose row starts at q.
int32_t nibble(const uint8_t* q, int e) { return (q[64 * (e / 8) + e % 4] >> (e % 8 < 4 ? 0 : 4)) & 0xF; }

float q4k_dot_spec(const PanelMatrix& w, int64_t l, const uint8_t* base, const BlockQ8_K* act) {
    float acc = 0;
    for (int64_t b = 0; b < w.blocks; ++b) {
        const BlockQ8_K& a = act[b];
        const uint8_t* blk = base + w.scale_bytes + size_t(b) * w.quant_bytes;
        const auto* mins = reinterpret_cast<const int16_t*>(blk + 128);
        int32_t I = 0, M = 0;
        for (int s = 0; s < 8; ++s) {
            int32_t sum = 0;
            for (int e = 0; e < 32; ++e) sum += nibble(blk + 384 + 256 * s + 4 * l, e) * a.qs[32 * s + e];
            I += int32_t(blk[16 * s + l]) * sum;
            M += int32_t(mins[2 * (kPanelRows * (s / 2) + l) + s % 2]) * (a.bsums[2 * s] + a.bsums[2 * s + 1]);
        }
        const float d = f16(load<uint16_t>(base + 64 * b + 2 * l));
        const float dmin = f16(load<uint16_t>(base + 64 * b + 2 * (kPanelRows + l)));
        acc = std::fma(std::fma(float(I), d, -(float(M) * dmin)), a.d, acc);
    }
    return acc;
}

}  // namespace

float panel_dot_spec(const PanelMatrix& w, int64_t row, const void* act_row) {
    const int64_t l = row % kPanelRows;
    const uint8_t* base = w.panel(row / kPanelRows);
    if (w.type == GGMLType::Q4_K) return q4k_dot_spec(w, l, base, static_cast<const BlockQ8_K*>(act_row));
    const auto* act = static_cast<const ActQ8Block*>(act_row);
    const uint8_t* quants = base + (has_min(w.type) ? 2 : 1) * w.scale_bytes;
    float acc = 0;
    for (int64_t b = 0; b < w.blocks; ++b) {
        const ActQ8Block& a = act[b];
        const uint8_t* q = quants + size_t(b) * w.quant_bytes + 4 * l;
        int32_t sum = -offset(w.type) * a.sum;
        for (int e = 0; e < 32; ++e) sum += (w.type == GGMLType::Q8_0 ? q[64 * (e / 4) + e % 4] : nibble(q, e)) * a.qs[e];
        const float d = f16(load<uint16_t>(base + 2 * (b * kPanelRows + l)));
        acc = std::fma(float(sum), d * a.d, acc);
        if (has_min(w.type)) acc = std::fma(f16(load<uint16_t>(base + w.scale_bytes + 2 * (b * kPanelRows + l))), a.dsum, acc);
    }
    return acc;
}

#if MINFER_AVX512

PanelTileShape panel_tile_shape(GGMLType t, bool one_row) {
    PanelTileShape s{};
    vec_dot_detail::avx512_panel_lookup(t, 1, 1, one_row, &s);
    return s;
}

PanelTileFn panel_tile_fn(GGMLType t, int rm, int np) {
    const PanelTileFn fn = vec_dot_detail::avx512_panel_lookup(t, rm, np, rm == 1, nullptr);
    if (!fn) throw std::invalid_argument("panel_tile_fn: tile larger than panel_tile_shape");
    return fn;
}

#else  // no AVX-512: each element is one panel_dot_spec

namespace {
void portable_tile(const PanelMatrix& w, int64_t p0, const uint8_t* act, size_t act_stride, float* out, int64_t ldo,
                   int rm, int np) {
    for (int i = 0; i < rm; ++i)
        for (int64_t r = 16 * p0; r < 16 * (p0 + np); ++r)
            out[i * ldo + (r - 16 * p0)] = panel_dot_spec(w, r, act + i * act_stride);
}
template <int RM, int NP>
void portable(const PanelMatrix& w, int64_t p0, const uint8_t* act, size_t act_stride, float* out, int64_t ldo) {
    portable_tile(w, p0, act, act_stride, out, ldo, RM, NP);
}
constexpr PanelTileFn kPortable[2][2] = {{portable<1, 1>, portable<1, 2>}, {portable<2, 1>, portable<2, 2>}};
}  // namespace

PanelTileShape panel_tile_shape(GGMLType, bool) { return {2, 2}; }

PanelTileFn panel_tile_fn(GGMLType, int rm, int np) {
    if (rm < 1 || rm > 2 || np < 1 || np > 2) throw std::invalid_argument("panel_tile_fn: tile larger than panel_tile_shape");
    return kPortable[rm - 1][np - 1];
}

#endif

}  // namespace minfer::cpu
