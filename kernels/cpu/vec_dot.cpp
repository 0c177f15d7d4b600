#include "kernels/cpu/vec_dot.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "engine/float16.h"
#include "engine/quant.h"

namespace minfer::cpu {

namespace {

// ---- small SIMD helpers ------------------------------------------------------

#if defined(__AVX2__)
inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// 32 int8 x 32 int8 -> 8 int32 partial sums. maddubs wants one unsigned
// operand, so the sign of x moves onto y: |x| * (y * sign(x)) = x * y.
inline __m256i dot_i8_epi32(__m256i x, __m256i y) {
    const __m256i ax = _mm256_sign_epi8(x, x);
    const __m256i sy = _mm256_sign_epi8(y, x);
#if defined(__AVXVNNI__) || (defined(__AVX512VNNI__) && defined(__AVX512VL__))
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), ax, sy);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sy), _mm256_set1_epi16(1));
#endif
}

inline int32_t hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}
#endif

inline int32_t dot_i8(const int8_t* a, const int8_t* b, int n) {
    int32_t s = 0;
    int i = 0;
#if defined(__AVX2__)
    __m256i acc = _mm256_setzero_si256();
    for (; i + 32 <= n; i += 32)
        acc = _mm256_add_epi32(acc, dot_i8_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i)),
                                                 _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i))));
    s = hsum_epi32(acc);
#endif
    for (; i < n; ++i) s += int32_t(a[i]) * b[i];
    return s;
}

inline float f16(uint16_t h) { return fp16_to_f32(h); }

// ---- float rows -------------------------------------------------------------

float dot_f32(const float* w, const float* x, int64_t n) {
    int64_t i = 0;
    float s = 0.0f;
#if defined(__AVX2__)
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 16), _mm256_loadu_ps(x + i + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 24), _mm256_loadu_ps(x + i + 24), a3);
    }
    s = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
#endif
    for (; i < n; ++i) s += w[i] * x[i];
    return s;
}

float dot_f16(const uint16_t* w, const float* x, int64_t n) {
    int64_t i = 0;
    float s = 0.0f;
#if defined(__AVX2__) && defined(__F16C__)
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    for (; i + 16 <= n; i += 16) {
        const __m256 w0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i)));
        const __m256 w1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i + 8)));
        a0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + i + 8), a1);
    }
    s = hsum(_mm256_add_ps(a0, a1));
#endif
    for (; i < n; ++i) s += f16(w[i]) * x[i];
    return s;
}

float dot_bf16(const uint16_t* w, const float* x, int64_t n) {
    int64_t i = 0;
    float s = 0.0f;
#if defined(__AVX2__)
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    for (; i + 16 <= n; i += 16) {
        // bf16 is the top half of a float: widen by shifting into place.
        const __m256i h0 = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i)));
        const __m256i h1 = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i + 8)));
        a0 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(h0, 16)), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(h1, 16)), _mm256_loadu_ps(x + i + 8), a1);
    }
    s = hsum(_mm256_add_ps(a0, a1));
#endif
    for (; i < n; ++i) s += bf16_to_f32(w[i]) * x[i];
    return s;
}

// ---- 32-weight block types against ActQ8_32 -----------------------------------

float dot_q8_0(const BlockQ8_0* w, const ActQ8_32* x, int64_t nb) {
#if defined(__AVX2__)
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        const __m256i qw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs));
        const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs));
        const __m256 d = _mm256_set1_ps(f16(w[b].d) * x[b].d);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8_epi32(qw, qx)), acc);
    }
    return hsum(acc);
#else
    float s = 0;
    for (int64_t b = 0; b < nb; ++b) s += f16(w[b].d) * x[b].d * dot_i8(w[b].qs, x[b].qs, 32);
    return s;
#endif
}

// Low nibbles are weights 0..15, high nibbles 16..31.
inline void unpack_nibbles(const uint8_t* qs, int8_t* q) {
    for (int j = 0; j < 16; ++j) {
        q[j] = int8_t(qs[j] & 0xF);
        q[j + 16] = int8_t(qs[j] >> 4);
    }
}

inline void add_fifth_bits(const uint8_t* qh_bytes, int8_t* q) {
    uint32_t qh;
    std::memcpy(&qh, qh_bytes, 4);
    for (int j = 0; j < 32; ++j) q[j] = int8_t(q[j] | (((qh >> j) & 1) << 4));
}

float dot_q4_0(const BlockQ4_0* w, const ActQ8_32* x, int64_t nb) {
    float s = 0;
    int8_t q[32];
    for (int64_t b = 0; b < nb; ++b) {
        unpack_nibbles(w[b].qs, q);
        s += f16(w[b].d) * x[b].d * float(dot_i8(q, x[b].qs, 32) - 8 * x[b].sum);
    }
    return s;
}

float dot_q4_1(const BlockQ4_1* w, const ActQ8_32* x, int64_t nb) {
    float s = 0;
    int8_t q[32];
    for (int64_t b = 0; b < nb; ++b) {
        unpack_nibbles(w[b].qs, q);
        s += x[b].d * (f16(w[b].d) * float(dot_i8(q, x[b].qs, 32)) + f16(w[b].m) * float(x[b].sum));
    }
    return s;
}

float dot_q5_0(const BlockQ5_0* w, const ActQ8_32* x, int64_t nb) {
    float s = 0;
    int8_t q[32];
    for (int64_t b = 0; b < nb; ++b) {
        unpack_nibbles(w[b].qs, q);
        add_fifth_bits(w[b].qh, q);
        s += f16(w[b].d) * x[b].d * float(dot_i8(q, x[b].qs, 32) - 16 * x[b].sum);
    }
    return s;
}

float dot_q5_1(const BlockQ5_1* w, const ActQ8_32* x, int64_t nb) {
    float s = 0;
    int8_t q[32];
    for (int64_t b = 0; b < nb; ++b) {
        unpack_nibbles(w[b].qs, q);
        add_fifth_bits(w[b].qh, q);
        s += x[b].d * (f16(w[b].d) * float(dot_i8(q, x[b].qs, 32)) + f16(w[b].m) * float(x[b].sum));
    }
    return s;
}

// ---- K types against BlockQ8_K ------------------------------------------------

// Q4_K and Q5_K: w = d*sc[s]*q - dmin*m[s] over 8 sub-blocks of 32. The min
// term needs only the activations' sum per sub-block, which bsums holds.
template <bool kFifthBit, typename Block>
float dot_q45_k(const Block* w, const BlockQ8_K* x, int64_t nb) {
    float s = 0;
    int8_t q[256];
    for (int64_t b = 0; b < nb; ++b) {
        for (int c = 0; c < 4; ++c)
            for (int l = 0; l < 32; ++l) {
                int lo = w[b].qs[32 * c + l] & 0xF, hi = w[b].qs[32 * c + l] >> 4;
                if constexpr (kFifthBit) {
                    lo |= ((w[b].qh[l] >> (2 * c)) & 1) << 4;
                    hi |= ((w[b].qh[l] >> (2 * c + 1)) & 1) << 4;
                }
                q[64 * c + l] = int8_t(lo);
                q[64 * c + 32 + l] = int8_t(hi);
            }
        int32_t scaled = 0, mins = 0;
        for (int sb = 0; sb < 8; ++sb) {
            uint8_t sc, m;
            q4k_scale_min(w[b].scales, sb, sc, m);
            scaled += sc * dot_i8(q + 32 * sb, x[b].qs + 32 * sb, 32);
            mins += m * (x[b].bsums[2 * sb] + x[b].bsums[2 * sb + 1]);
        }
        s += x[b].d * (f16(w[b].d) * float(scaled) - f16(w[b].dmin) * float(mins));
    }
    return s;
}

float dot_q6_k(const BlockQ6_K* w, const BlockQ8_K* x, int64_t nb) {
    float s = 0;
    int8_t q[256];
    for (int64_t b = 0; b < nb; ++b) {
        for (int h = 0; h < 2; ++h) {
            const uint8_t* ql = w[b].ql + 64 * h;
            const uint8_t* qh = w[b].qh + 32 * h;
            int8_t* out = q + 128 * h;
            for (int l = 0; l < 32; ++l) {
                out[l] = int8_t(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
                out[l + 32] = int8_t(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
                out[l + 64] = int8_t(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                out[l + 96] = int8_t(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
        }
        int32_t sum = 0;
        for (int g = 0; g < 16; ++g) sum += w[b].scales[g] * dot_i8(q + 16 * g, x[b].qs + 16 * g, 16);
        s += f16(w[b].d) * x[b].d * float(sum);
    }
    return s;
}

void quantize_q8_32(const float* x, ActQ8_32* out, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b) {
        const float* v = x + 32 * b;
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(v[j]));
        const float d = amax / 127.0f, inv = d > 0 ? 1.0f / d : 0.0f;
        int32_t sum = 0;
        for (int j = 0; j < 32; ++j) {
            out[b].qs[j] = int8_t(std::lrintf(v[j] * inv));
            sum += out[b].qs[j];
        }
        out[b].d = d;
        out[b].sum = sum;
    }
}

}  // namespace

ActFormat act_format(GGMLType t) {
    switch (t) {
        case GGMLType::Q8_0: case GGMLType::Q4_0: case GGMLType::Q4_1: case GGMLType::Q5_0: case GGMLType::Q5_1:
            return ActFormat::Q8_32;
        case GGMLType::Q4_K: case GGMLType::Q5_K: case GGMLType::Q6_K:
            return ActFormat::Q8_K;
        default:
            return ActFormat::F32;
    }
}

size_t act_row_bytes(ActFormat f, int64_t n) {
    switch (f) {
        case ActFormat::F32: return size_t(n) * sizeof(float);
        case ActFormat::Q8_32: return size_t(n / 32) * sizeof(ActQ8_32);
        case ActFormat::Q8_K: return size_t(n / 256) * sizeof(BlockQ8_K);
    }
    return 0;
}

void prepare_activations(ActFormat f, const float* x, void* out, int64_t n) {
    switch (f) {
        case ActFormat::F32: std::memcpy(out, x, size_t(n) * sizeof(float)); break;
        case ActFormat::Q8_32: quantize_q8_32(x, static_cast<ActQ8_32*>(out), n); break;
        case ActFormat::Q8_K: quantize_row(GGMLType::Q8_K, x, out, n); break;
    }
}

bool has_vec_dot(GGMLType t) {
    switch (t) {
        case GGMLType::F32: case GGMLType::F16: case GGMLType::BF16: case GGMLType::Q8_0: case GGMLType::Q4_0:
        case GGMLType::Q4_1: case GGMLType::Q5_0: case GGMLType::Q5_1: case GGMLType::Q4_K: case GGMLType::Q5_K:
        case GGMLType::Q6_K:
            return true;
        default:
            return false;
    }
}

float vec_dot(GGMLType t, const void* w, const void* act, int64_t n) {
    const auto* x32 = static_cast<const ActQ8_32*>(act);
    const auto* xk = static_cast<const BlockQ8_K*>(act);
    switch (t) {
        case GGMLType::F32: return dot_f32(static_cast<const float*>(w), static_cast<const float*>(act), n);
        case GGMLType::F16: return dot_f16(static_cast<const uint16_t*>(w), static_cast<const float*>(act), n);
        case GGMLType::BF16: return dot_bf16(static_cast<const uint16_t*>(w), static_cast<const float*>(act), n);
        case GGMLType::Q8_0: return dot_q8_0(static_cast<const BlockQ8_0*>(w), x32, n / 32);
        case GGMLType::Q4_0: return dot_q4_0(static_cast<const BlockQ4_0*>(w), x32, n / 32);
        case GGMLType::Q4_1: return dot_q4_1(static_cast<const BlockQ4_1*>(w), x32, n / 32);
        case GGMLType::Q5_0: return dot_q5_0(static_cast<const BlockQ5_0*>(w), x32, n / 32);
        case GGMLType::Q5_1: return dot_q5_1(static_cast<const BlockQ5_1*>(w), x32, n / 32);
        case GGMLType::Q4_K: return dot_q45_k<false>(static_cast<const BlockQ4_K*>(w), xk, n / 256);
        case GGMLType::Q5_K: return dot_q45_k<true>(static_cast<const BlockQ5_K*>(w), xk, n / 256);
        case GGMLType::Q6_K: return dot_q6_k(static_cast<const BlockQ6_K*>(w), xk, n / 256);
        default: throw std::invalid_argument(std::string("vec_dot: no dot product for ") + ggml_type_name(t));
    }
}

}  // namespace minfer::cpu
