// IEEE half and bfloat16 conversions (the scalar reference; kernels vectorise their own).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace minfer {

inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(uint32_t{h} << 16); }

inline uint16_t f32_to_bf16(float f) {
    uint32_t u = std::bit_cast<uint32_t>(f);
    if ((u & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
    u += 0x7fff + ((u >> 16) & 1);  // round to nearest even
    return static_cast<uint16_t>(u >> 16);
}

inline float fp16_to_f32(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000) << 16;
    const uint32_t exp = (h >> 10) & 0x1f;
    const uint32_t man = h & 0x3ff;
    if (exp == 0) {  // zero or subnormal: man * 2^-24
        const float f = static_cast<float>(man) * 0x1.0p-24f;
        return std::bit_cast<float>(std::bit_cast<uint32_t>(f) | sign);
    }
    if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000 | (man << 13));  // inf / NaN
    return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
}

inline uint16_t f32_to_fp16(float f) {
    const uint32_t u = std::bit_cast<uint32_t>(f);
    const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
    const uint32_t a = u & 0x7fffffff;
    if (a > 0x7f800000) return sign | 0x7e00;                // NaN
    if (a >= 0x477ff000) return sign | 0x7c00;               // overflow to inf (>= 65520)
    if (a < 0x38800000) {                                    // subnormal half (< 2^-14)
        const float mag = std::bit_cast<float>(a);
        // Adding 0.5 turns the float's mantissa into the half's, rounded to nearest even.
        const uint32_t v = std::bit_cast<uint32_t>(mag + 0.5f) - std::bit_cast<uint32_t>(0.5f);
        return sign | static_cast<uint16_t>(v);
    }
    uint32_t r = a + ((uint32_t(-112) << 23)) + 0xfff + ((a >> 13) & 1);  // rebias, round to nearest even
    return sign | static_cast<uint16_t>(r >> 13);
}

// The bits of a half or bfloat16 as a row stores them, at an address with no
// alignment promised.
inline uint16_t load_half_bits(const void* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return h;
}

inline void store_half_bits(void* p, uint16_t h) { std::memcpy(p, &h, 2); }

}  // namespace minfer
