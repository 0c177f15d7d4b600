// Quant formats (kernels/formats/quant.h): block sizes, hand-built blocks decoded by the
// formulas in shared/docs/gguf-notes.md (written out again here, independently
// of quant.cpp), and round-trip error bounds of our quantizers. The byte-level
// cross-check against gguf-py is tests/integration/test_quant_oracle.py.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/formats/float16.h"
#include "engine/gguf/gguf.h"
#include "kernels/formats/quant.h"
#include "../rel_error.h"

using namespace minfer;

namespace {

uint16_t h(float f) { return f32_to_fp16(f); }

std::vector<float> normal(size_t n, uint32_t seed, float sigma = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, sigma);
    std::vector<float> v(n);
    for (auto& x : v) x = nd(rng);
    return v;
}

std::vector<float> round_trip(GGMLType t, const std::vector<float>& x) {
    const auto n = static_cast<int64_t>(x.size());
    std::vector<uint8_t> q(ggml_row_bytes(t, n));
    quantize_row(t, x.data(), q.data(), n);
    std::vector<float> y(x.size());
    dequantize_row(t, q.data(), y.data(), n);
    return y;
}

// RMS of the error relative to the RMS of the data.
double rel_rmse(const std::vector<float>& x, const std::vector<float>& y) { return minfer::test::rel_error(y, x); }

template <class Block>
std::vector<float> decode(GGMLType t, const Block& b) {
    const int64_t n = ggml_type_traits(static_cast<uint32_t>(t))->block_elems;
    std::vector<float> y(n);
    dequantize_row(t, &b, y.data(), n);
    return y;
}

const GGMLType kBlockTypes[] = {GGMLType::Q8_0, GGMLType::Q4_0, GGMLType::Q4_1, GGMLType::Q5_0, GGMLType::Q5_1,
                                GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K, GGMLType::Q8_K};

}  // namespace

TEST_CASE("quant: block structs match the file format's block sizes") {
    auto bytes = [](GGMLType t) { return ggml_type_traits(static_cast<uint32_t>(t))->block_bytes; };
    CHECK(sizeof(BlockQ8_0) == bytes(GGMLType::Q8_0));
    CHECK(sizeof(BlockQ4_0) == bytes(GGMLType::Q4_0));
    CHECK(sizeof(BlockQ4_1) == bytes(GGMLType::Q4_1));
    CHECK(sizeof(BlockQ5_0) == bytes(GGMLType::Q5_0));
    CHECK(sizeof(BlockQ5_1) == bytes(GGMLType::Q5_1));
    CHECK(sizeof(BlockQ4_K) == bytes(GGMLType::Q4_K));
    CHECK(sizeof(BlockQ5_K) == bytes(GGMLType::Q5_K));
    CHECK(sizeof(BlockQ6_K) == bytes(GGMLType::Q6_K));
    CHECK(sizeof(BlockQ8_K) == bytes(GGMLType::Q8_K));
    CHECK(alignof(BlockQ8_K) == 1);
}

TEST_CASE("quant: type predicates and argument checks") {
    for (GGMLType t : kBlockTypes) {
        CHECK(is_quantized(t));
        CHECK(can_quantize(t));
        CHECK(can_dequantize(t));
    }
    for (GGMLType t : {GGMLType::F32, GGMLType::F16, GGMLType::BF16}) {
        CHECK_FALSE(is_quantized(t));
        CHECK(can_quantize(t));
    }
    CHECK(is_quantized(GGMLType::Q2_K));  // a block type we do not implement
    CHECK_FALSE(can_quantize(GGMLType::Q2_K));
    CHECK_FALSE(can_dequantize(GGMLType::Q8_1));
    CHECK_FALSE(is_quantized(static_cast<GGMLType>(99)));

    std::vector<float> f(512);
    std::vector<uint8_t> b(4096);
    CHECK_THROWS_AS(quantize_row(GGMLType::Q8_0, f.data(), b.data(), 33), std::invalid_argument);
    CHECK_THROWS_AS(dequantize_row(GGMLType::Q4_K, b.data(), f.data(), 128), std::invalid_argument);
    CHECK_THROWS_AS(dequantize_row(GGMLType::Q8_0, b.data(), f.data(), -32), std::invalid_argument);
    CHECK_THROWS_AS(dequantize_row(GGMLType::Q2_K, b.data(), f.data(), 256), std::invalid_argument);
    CHECK_THROWS_AS(quantize_row(GGMLType::I8, f.data(), b.data(), 4), std::invalid_argument);
    CHECK_THROWS_AS(quantize_row(static_cast<GGMLType>(99), f.data(), b.data(), 4), std::invalid_argument);
    quantize_row(GGMLType::Q4_K, f.data(), b.data(), 0);  // zero blocks is fine
}

TEST_CASE("quant: round-trip error on normal data") {
    // Relative RMSE measured on this data (seed 7, 64K values) is in the
    // comment; each bound sits about 10% above it.
    struct Case {
        GGMLType t;
        double bound;
    };
    const Case cases[] = {
        {GGMLType::F32, 0.0},      // exact
        {GGMLType::F16, 3.0e-4},   // 2.07e-4
        {GGMLType::BF16, 2.0e-3},  // 1.65e-3
        {GGMLType::Q8_0, 6.0e-3},  // 5.40e-3
        {GGMLType::Q8_K, 7.8e-3},  // 7.10e-3
        {GGMLType::Q6_K, 0.019},   // 0.0173
        {GGMLType::Q5_K, 0.039},   // 0.0353
        {GGMLType::Q5_1, 0.042},   // 0.0380
        {GGMLType::Q5_0, 0.047},   // 0.0430
        {GGMLType::Q4_K, 0.078},   // 0.0711
        {GGMLType::Q4_1, 0.086},   // 0.0785
        {GGMLType::Q4_0, 0.095},   // 0.0868
    };
    const std::vector<float> x = normal(256 * 256, 7);
    for (const Case& c : cases) {
        const double e = rel_rmse(x, round_trip(c.t, x));
        INFO(std::string(ggml_type_name(c.t)), " relative RMSE ", e);
        CHECK(e <= c.bound);
        MESSAGE(std::string(ggml_type_name(c.t)), " round-trip relative RMSE ", e);
    }
    // At the same bits per weight, the K types' scale search beats the plain
    // min/max rule of Q4_1/Q5_1 despite sharing one f16 d over 256 weights.
    CHECK(rel_rmse(x, round_trip(GGMLType::Q4_K, x)) < 0.95 * rel_rmse(x, round_trip(GGMLType::Q4_1, x)));
    CHECK(rel_rmse(x, round_trip(GGMLType::Q5_K, x)) < 0.95 * rel_rmse(x, round_trip(GGMLType::Q5_1, x)));
}

TEST_CASE("quant: the error is scale-free and odd data round-trips sanely") {
    for (GGMLType t : kBlockTypes) {
        INFO(std::string(ggml_type_name(t)));
        const double base = rel_rmse(normal(4096, 3), round_trip(t, normal(4096, 3)));
        for (float sigma : {1e-3f, 100.0f}) {
            const auto x = normal(4096, 3, sigma);
            CHECK(rel_rmse(x, round_trip(t, x)) <= base * 1.05 + 1e-3);
        }
        // Zeros, constants and all-negative sub-blocks: finite, and close.
        std::vector<float> odd(1024, 0.0f);
        for (int i = 256; i < 512; ++i) odd[i] = 0.75f;
        for (int i = 512; i < 768; ++i) odd[i] = -0.5f - 0.001f * static_cast<float>(i % 32);
        for (int i = 768; i < 1024; ++i) odd[i] = std::ldexp(1.0f, (i / 32) % 8) * (i % 2 ? 1.0f : -1.0f);
        const auto y = round_trip(t, odd);
        for (int i = 0; i < 256; ++i) REQUIRE(y[i] == 0.0f);
        for (float v : y) REQUIRE(std::isfinite(v));
        CHECK(rel_rmse(odd, y) < 0.1);  // Q4_0 is worst: +-2^k blocks clip the positive side to 7/8
    }
}

TEST_CASE("quant: exactly representable data round-trips exactly") {
    // Integers whose extreme fixes the f16 scale at exactly 1.
    std::vector<float> x(32);
    for (int j = 0; j < 32; ++j) x[j] = static_cast<float>((j * 37) % 255 - 127);
    x[5] = -127;
    CHECK(round_trip(GGMLType::Q8_0, x) == x);

    for (int j = 0; j < 32; ++j) x[j] = static_cast<float>((j * 5) % 16 - 8);  // -8..7
    CHECK(round_trip(GGMLType::Q4_0, x) == x);
    for (int j = 0; j < 32; ++j) x[j] = static_cast<float>((j * 7) % 32 - 16);  // -16..15
    CHECK(round_trip(GGMLType::Q5_0, x) == x);
    for (int j = 0; j < 32; ++j) x[j] = static_cast<float>((j * 5) % 16 + 3);  // min 3, range 15
    CHECK(round_trip(GGMLType::Q4_1, x) == x);
    for (int j = 0; j < 32; ++j) x[j] = static_cast<float>((j * 7) % 32 - 40);  // min -40, range 31
    CHECK(round_trip(GGMLType::Q5_1, x) == x);
}

TEST_CASE("quant: hand-built Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 blocks") {
    SUBCASE("Q8_0 with a negative scale and the int8 extremes") {
        BlockQ8_0 b{};
        b.d = h(-0.5f);
        for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>((j * 9) % 256 - 128);
        b.qs[31] = 127;
        const auto y = decode(GGMLType::Q8_0, b);
        CHECK(y[0] == 64.0f);
        CHECK(y[31] == -63.5f);
        for (int j = 0; j < 32; ++j) CHECK(y[j] == -0.5f * static_cast<float>(b.qs[j]));
    }
    SUBCASE("Q4_0: low nibbles are weights 0..15, high nibbles 16..31") {
        BlockQ4_0 b{};
        b.d = h(-2.0f);
        for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>((15 - j) << 4 | j);
        const auto y = decode(GGMLType::Q4_0, b);
        CHECK(y[0] == 16.0f);    // q 0 -> -8 * -2
        CHECK(y[16] == -14.0f);  // q 15 -> 7 * -2
        for (int j = 0; j < 16; ++j) {
            CHECK(y[j] == -2.0f * static_cast<float>(j - 8));
            CHECK(y[j + 16] == -2.0f * static_cast<float>(7 - j));
        }
    }
    SUBCASE("Q4_1: the min is added") {
        BlockQ4_1 b{};
        b.d = h(0.25f);
        b.m = h(-1.0f);
        for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(0xF0 | (j % 2 ? 0xF : 0));
        const auto y = decode(GGMLType::Q4_1, b);
        for (int j = 0; j < 16; ++j) {
            CHECK(y[j] == (j % 2 ? 2.75f : -1.0f));
            CHECK(y[j + 16] == 2.75f);
        }
    }
    SUBCASE("Q5_0 and Q5_1: bit j of the little-endian qh is weight j's 5th bit") {
        BlockQ5_0 b{};
        b.d = h(0.5f);
        const uint32_t qh = 0x80000001u | (1u << 16);  // weights 0, 16, 31
        std::memcpy(b.qh, &qh, 4);
        for (int j = 0; j < 16; ++j) b.qs[j] = 0xFF;
        const auto y = decode(GGMLType::Q5_0, b);
        for (int j = 0; j < 32; ++j) {
            const bool top = j == 0 || j == 16 || j == 31;
            CHECK(y[j] == 0.5f * static_cast<float>((top ? 31 : 15) - 16));
        }
        BlockQ5_1 c{};
        c.d = h(-1.0f);
        c.m = h(3.0f);
        std::memcpy(c.qh, &qh, 4);
        for (int j = 0; j < 16; ++j) c.qs[j] = static_cast<uint8_t>(j << 4 | j);
        const auto z = decode(GGMLType::Q5_1, c);
        for (int j = 0; j < 32; ++j) {
            const bool top = j == 0 || j == 16 || j == 31;
            CHECK(z[j] == -1.0f * static_cast<float>((j % 16) + (top ? 16 : 0)) + 3.0f);
        }
    }
}

namespace {

// Packs sub-block s's 6-bit scale and min the way the notes describe (byte by
// byte, ORed into a zeroed array).
void pack_scale_min(uint8_t* sc12, int s, int sc, int m) {
    if (s < 4) {
        sc12[s] |= static_cast<uint8_t>(sc & 63);
        sc12[s + 4] |= static_cast<uint8_t>(m & 63);
    } else {
        sc12[s + 4] |= static_cast<uint8_t>((sc & 0xF) | (m & 0xF) << 4);
        sc12[s - 4] |= static_cast<uint8_t>((sc >> 4) << 6);
        sc12[s] |= static_cast<uint8_t>((m >> 4) << 6);
    }
}

}  // namespace

TEST_CASE("quant: Q4_K/Q5_K scale/min packing, every sub-block") {
    // One sub-block at a time at the 6-bit maximum: only that one may decode to it.
    for (int s = 0; s < 8; ++s) {
        INFO("sub-block ", s);
        BlockQ4_K b{};
        b.d = h(1.0f);
        b.dmin = h(0.5f);
        pack_scale_min(b.scales, s, 63, 63);
        for (int t = 0; t < 8; ++t) {
            uint8_t sc, m;
            q4k_scale_min(b.scales, t, sc, m);
            CHECK(sc == (t == s ? 63 : 0));
            CHECK(m == (t == s ? 63 : 0));
        }
        std::memset(b.qs, 0x11, sizeof b.qs);  // every q is 1
        const auto y = decode(GGMLType::Q4_K, b);
        for (int i = 0; i < 256; ++i) CHECK(y[i] == (i / 32 == s ? 63.0f - 31.5f : 0.0f));
        std::memset(b.qs, 0xFF, sizeof b.qs);  // every q is 15
        const auto z = decode(GGMLType::Q4_K, b);
        for (int i = 0; i < 256; ++i) CHECK(z[i] == (i / 32 == s ? 63.0f * 15.0f - 31.5f : 0.0f));
    }
    // Scale and min with different bit patterns in every sub-block, both together.
    const int sc[8] = {1, 62, 33, 17, 63, 40, 2, 48};
    const int m[8] = {63, 5, 0, 44, 21, 63, 50, 31};
    uint8_t packed[12] = {};
    for (int s = 0; s < 8; ++s) pack_scale_min(packed, s, sc[s], m[s]);
    for (int s = 0; s < 8; ++s) {
        uint8_t a, b;
        q4k_scale_min(packed, s, a, b);
        CHECK(a == sc[s]);
        CHECK(b == m[s]);
    }
}

TEST_CASE("quant: hand-built Q4_K and Q5_K blocks") {
    const int sc[8] = {1, 62, 33, 17, 63, 40, 2, 48};
    const int m[8] = {63, 5, 0, 44, 21, 63, 50, 31};
    const float d = -0.5f, dmin = 0.25f;  // a negative d flips the sign of every scale

    BlockQ4_K b{};
    b.d = h(d);
    b.dmin = h(dmin);
    for (int s = 0; s < 8; ++s) pack_scale_min(b.scales, s, sc[s], m[s]);
    for (int k = 0; k < 128; ++k) b.qs[k] = static_cast<uint8_t>(k * 29 + 3);
    const auto y = decode(GGMLType::Q4_K, b);
    // Chunk c of 64 weights uses qs[32c..32c+31]: low nibbles are the first 32.
    for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) {
            const uint8_t q = b.qs[32 * c + l];
            CHECK(y[64 * c + l] == d * sc[2 * c] * static_cast<float>(q & 0xF) - dmin * m[2 * c]);
            CHECK(y[64 * c + 32 + l] == d * sc[2 * c + 1] * static_cast<float>(q >> 4) - dmin * m[2 * c + 1]);
        }

    BlockQ5_K c5{};
    const float dmin5 = -0.75f;  // a negative dmin turns the subtracted mins into added ones
    c5.d = h(d);
    c5.dmin = h(dmin5);
    std::memcpy(c5.scales, b.scales, 12);
    std::memcpy(c5.qs, b.qs, 128);
    for (int l = 0; l < 32; ++l) c5.qh[l] = static_cast<uint8_t>(l * 53 + 11);
    c5.qh[0] = 0xFF;  // the 5th bit set for position 0 of every sub-block
    const auto z = decode(GGMLType::Q5_K, c5);
    for (int c = 0; c < 4; ++c)
        for (int l = 0; l < 32; ++l) {
            const uint8_t q = c5.qs[32 * c + l];
            const int hi0 = (c5.qh[l] >> (2 * c)) & 1, hi1 = (c5.qh[l] >> (2 * c + 1)) & 1;
            CHECK(z[64 * c + l] == d * sc[2 * c] * static_cast<float>((q & 0xF) + 16 * hi0) - dmin5 * m[2 * c]);
            CHECK(z[64 * c + 32 + l] == d * sc[2 * c + 1] * static_cast<float>((q >> 4) + 16 * hi1) - dmin5 * m[2 * c + 1]);
        }
}

TEST_CASE("quant: hand-built Q6_K block, signed scales from -128 to 127") {
    BlockQ6_K b{};
    const float d = 0.125f;
    b.d = h(d);
    for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<int8_t>(s * 17 - 128);  // -128 .. 127
    for (int k = 0; k < 128; ++k) b.ql[k] = static_cast<uint8_t>(k * 31 + 7);
    for (int k = 0; k < 64; ++k) b.qh[k] = static_cast<uint8_t>(k * 45 + 2);
    b.ql[0] = 0xFF;
    b.qh[0] = 0xFF;  // weights 0, 32, 64, 96 have q = 63
    const auto y = decode(GGMLType::Q6_K, b);
    for (int hh = 0; hh < 2; ++hh) {
        const uint8_t* L = b.ql + 64 * hh;
        const uint8_t* H = b.qh + 32 * hh;
        const int8_t* S = b.scales + 8 * hh;
        for (int l = 0; l < 32; ++l) {
            const int q0 = (L[l] & 0xF) | ((H[l] >> 0 & 3) << 4);
            const int q1 = (L[l + 32] & 0xF) | ((H[l] >> 2 & 3) << 4);
            const int q2 = (L[l] >> 4) | ((H[l] >> 4 & 3) << 4);
            const int q3 = (L[l + 32] >> 4) | ((H[l] >> 6 & 3) << 4);
            CHECK(y[128 * hh + l] == d * S[0 + l / 16] * static_cast<float>(q0 - 32));
            CHECK(y[128 * hh + 32 + l] == d * S[2 + l / 16] * static_cast<float>(q1 - 32));
            CHECK(y[128 * hh + 64 + l] == d * S[4 + l / 16] * static_cast<float>(q2 - 32));
            CHECK(y[128 * hh + 96 + l] == d * S[6 + l / 16] * static_cast<float>(q3 - 32));
        }
    }
    CHECK(y[0] == d * -128.0f * 31.0f);
    CHECK(y[255] == d * 127.0f * static_cast<float>(((b.ql[127] >> 4) | ((b.qh[63] >> 6) << 4)) - 32));
}

TEST_CASE("quant: Q8_K decodes d*qs and its bsums are the 16-wide group sums") {
    BlockQ8_K b{};
    b.d = -0.25f;
    for (int i = 0; i < 256; ++i) b.qs[i] = static_cast<int8_t>(i * 13 - 128);
    const auto y = decode(GGMLType::Q8_K, b);
    for (int i = 0; i < 256; ++i) CHECK(y[i] == -0.25f * static_cast<float>(b.qs[i]));

    const auto x = normal(256, 11);
    BlockQ8_K q{};
    quantize_row(GGMLType::Q8_K, x.data(), &q, 256);
    int total_abs_max = 0;
    for (int g = 0; g < 16; ++g) {
        int sum = 0;
        for (int i = 16 * g; i < 16 * g + 16; ++i) sum += q.qs[i];
        CHECK(q.bsums[g] == sum);
    }
    for (int i = 0; i < 256; ++i) total_abs_max = std::max(total_abs_max, std::abs(int{q.qs[i]}));
    CHECK(total_abs_max == 127);  // absmax maps to +-127
}

namespace {

// Sub-block s's 6-bit scale and min read back byte by byte as the notes describe
// (the inverse of pack_scale_min above, not quant.h's q4k_scale_min).
void unpack_scale_min(const uint8_t* sc12, int s, int& sc, int& m) {
    if (s < 4) {
        sc = sc12[s] & 63;
        m = sc12[s + 4] & 63;
    } else {
        sc = (sc12[s + 4] & 0xF) | (sc12[s - 4] >> 6) << 4;
        m = (sc12[s + 4] >> 4) | (sc12[s] >> 6) << 4;
    }
}

// Q4_K decoded by the notes' formula, from the block's bytes at any address.
std::vector<float> reference_q4k(const uint8_t* bytes, int64_t n) {
    std::vector<float> y(static_cast<size_t>(n));
    for (int64_t blk = 0; blk < n / 256; ++blk) {
        BlockQ4_K b;
        std::memcpy(&b, bytes + blk * sizeof(BlockQ4_K), sizeof b);
        const float d = fp16_to_f32(b.d), dmin = fp16_to_f32(b.dmin);
        for (int c = 0; c < 4; ++c) {
            int sc0, m0, sc1, m1;
            unpack_scale_min(b.scales, 2 * c, sc0, m0);
            unpack_scale_min(b.scales, 2 * c + 1, sc1, m1);
            for (int l = 0; l < 32; ++l) {
                const uint8_t q = b.qs[32 * c + l];
                y[256 * blk + 64 * c + l] = d * sc0 * static_cast<float>(q & 0xF) - dmin * m0;
                y[256 * blk + 64 * c + 32 + l] = d * sc1 * static_cast<float>(q >> 4) - dmin * m1;
            }
        }
    }
    return y;
}

}  // namespace

TEST_CASE("quant: rows are independent of buffer alignment") {
    // Q8_0 blocks are 34 bytes, so row data is often only 2-byte aligned. Both
    // the misaligned and the aligned copy must decode to the notes' formula
    // (written out above), not merely to each other.
    const int64_t n = 512;
    const auto x = normal(n, 5);
    std::vector<uint8_t> a(ggml_row_bytes(GGMLType::Q4_K, n) + 1);
    quantize_row(GGMLType::Q4_K, x.data(), a.data() + 1, n);
    const auto want = reference_q4k(a.data() + 1, n);
    std::vector<float> y1(n), y2(n);
    dequantize_row(GGMLType::Q4_K, a.data() + 1, y1.data(), n);
    std::vector<uint8_t> aligned(a.begin() + 1, a.end());
    dequantize_row(GGMLType::Q4_K, aligned.data(), y2.data(), n);
    CHECK(y1 == want);
    CHECK(y2 == want);
    CHECK(rel_rmse(x, want) < 0.1);  // and the reference is a real decoding of x
}
