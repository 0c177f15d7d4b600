// A host model of the CUDA backend's FP8 E4M3 conversion (--quantization fp8),
// for the op tests' references: per-tensor scale = absmax / 448 (1 for an
// all-zero tensor), values e4m3(v / scale) rounded to nearest even and
// saturated at +-448, as cvt.rn.satfinite.e4m3x2.f32 does on the device.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace minfer::fp8_host {

constexpr float kMax = 448.0f;

// The E4M3 value nearest to v (ties to even), saturated; NaN stays NaN.
inline float e4m3_round(float v) {
    if (std::isnan(v)) return v;
    const float a = std::fabs(v);
    if (a == 0.0f) return v;
    float q;
    if (a >= kMax) {
        q = kMax;
    } else {
        int e = 0;
        std::frexp(a, &e);              // a = m * 2^e, m in [0.5, 1): the exponent of a is e - 1
        const int exp = std::max(e - 1, -6);  // below 2^-6: subnormals, a fixed quantum of 2^-9
        const float quantum = std::ldexp(1.0f, exp - 3);  // 3 mantissa bits
        q = std::nearbyint(a / quantum) * quantum;        // exact scaling; nearbyint rounds ties to even
        if (q > kMax) q = kMax;  // cannot happen below 448 (the next step, 464, rounds down to 448)
    }
    return std::signbit(v) ? -q : q;
}

// The scale the device computes: absmax / 448, or 1 if that is not positive.
inline float scale_of(const float* v, size_t n) {
    float amax = 0.0f;
    for (size_t i = 0; i < n; ++i)
        if (!std::isnan(v[i])) amax = std::max(amax, std::fabs(v[i]));
    const float s = amax / kMax;
    return s > 0.0f ? s : 1.0f;
}

// What the device's matmul sees: scale * e4m3(v / scale) for every element,
// rounded to float (the scale is a float; the product rounds once).
inline std::vector<float> dequantized(const std::vector<float>& v, float* scale_out = nullptr) {
    const float s = scale_of(v.data(), v.size());
    std::vector<float> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = s * e4m3_round(v[i] / s);
    if (scale_out) *scale_out = s;
    return out;
}

}  // namespace minfer::fp8_host
