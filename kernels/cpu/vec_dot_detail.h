// What the two files of the CPU dot products share: whether the AVX-512
// tiles are built, and the small loads that the inner loops of both inline
// (so they stay in this header, not behind a call). vec_dot.cpp holds the
// activation preparation, the plain C++ spec, the portable tiles and the entry
// points; vec_dot_avx512.cpp the AVX-512 tiles.
#pragma once

// GCC 12's AVX-512 headers warn about their own _mm512_undefined_*() (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>
#include <cstring>

#include "kernels/cpu/panels.h"
#include "kernels/cpu/vec_dot.h"
#include "kernels/formats/float16.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__) && \
    defined(__F16C__)
#define MINFER_AVX512 1
#else
#define MINFER_AVX512 0
#endif

namespace minfer::cpu::vec_dot_detail {

#if defined(__F16C__)
inline float f16(uint16_t h) { return _cvtsh_ss(h); }  // one instruction, the same value
#else
inline float f16(uint16_t h) { return fp16_to_f32(h); }
#endif

template <class T>
inline T load(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
}

#if MINFER_AVX512
// The AVX-512 tile function for type t, rm x rn (vec_dot_avx512.cpp); nullptr
// past the type's tile shape, which *shape receives when not null.
DotTileFn avx512_lookup(GGMLType t, int rm, int rn, TileShape* shape);
// The same for panels (panels_avx512.cpp): the decode tiles when one_row.
PanelTileFn avx512_panel_lookup(GGMLType t, int rm, int np, bool one_row, PanelTileShape* shape);
#endif

}  // namespace minfer::cpu::vec_dot_detail
