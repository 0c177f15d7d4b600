// What the CPU attention kernels share (attention.cpp: lanes are (row, head)
// pairs; attention_narrow.cpp: lanes are keys, then dimensions): the lane
// types, the widening of the pool's elements and e^x. Internal to kernels/cpu.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/formats/float16.h"

namespace minfer::cpu {

// W lanes as one value (GCC/Clang vector extensions): 16 are one AVX-512
// register, two AVX2 ones, or four SSE/NEON; each operation is lane by lane
// IEEE arithmetic whatever the machine and whatever W, so a lane's bits do not
// depend on the width of the tile that holds it.
template <int W>
struct Lanes {
    typedef float f32 __attribute__((vector_size(W * sizeof(float))));
    typedef int32_t i32 __attribute__((vector_size(W * sizeof(int32_t))));
};

inline float widen(float x) { return x; }
inline float widen(uint16_t x) { return bf16_to_f32(x); }

// e^x for x <= 0 (scores minus their lane's maximum) as 2^i * 2^f, with a
// degree-6 polynomial for 2^f on [-0.5, 0.5] (relative error under 2e-7).
// 0 below -87, and at -inf (a masked key).
template <class f32xL, class i32xL>
inline f32xL exp_nonpositive(f32xL x) {
    const f32xL floor87 = f32xL{} - 87.0f;
    const f32xL t = (x < floor87 ? floor87 : x) * 1.44269504088896341f;  // log2(e)
    const f32xL magic = f32xL{} + 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
    const f32xL i = (t + magic) - magic;
    const f32xL f = t - i;
    f32xL p = f32xL{} + 1.5403530393381606e-4f;
    p = p * f + 1.3333558146428443e-3f;
    p = p * f + 9.6181291076284772e-3f;
    p = p * f + 5.5504108664821580e-2f;
    p = p * f + 2.4022650695910071e-1f;
    p = p * f + 6.9314718055994531e-1f;
    p = p * f + 1.0f;
    const i32xL bits = (__builtin_convertvector(i, i32xL) + 127) << 23;
    const f32xL scaled = (f32xL)bits * p;
    return x < floor87 ? f32xL{} : scaled;
}

// The pool slot of each key lo..hi of a sequence, walking its block table
// (a division per key would cost more than the key's arithmetic).
inline void key_slots(const PagedSequence& seq, int32_t lo, int32_t hi, int64_t* slots) {
    int32_t block = lo / seq.block_size, offset = lo % seq.block_size;
    for (int32_t t = lo; t <= hi; ++t) {
        slots[t - lo] = int64_t(seq.block_table[block]) * seq.block_size + offset;
        if (++offset == seq.block_size) ++block, offset = 0;
    }
}

typedef Lanes<16>::f32 f32x16;
typedef Lanes<16>::i32 i32x16;

// Tiles of at most this many pairs go to attend_narrow.
constexpr int kNarrowLanes = 4;

// attend_tile for a tile of at most kNarrowLanes pairs, the same bits.
template <class T>
void attend_narrow(const AttentionTile& tile, const float* q_all, int32_t n_heads, int32_t hd, float scale,
                   const T* k_pool, const T* v_pool, const PagedSequence& seq, std::vector<float>& scratch,
                   float* out);

}  // namespace minfer::cpu
