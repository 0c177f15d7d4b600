#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <stdexcept>
#include <vector>

#include "kernels/sampling.h"

using namespace minfer;

TEST_CASE("Philox4x32-10 matches the Random123 known-answer vectors") {
    CHECK(philox4x32({0, 0, 0, 0}, {0, 0}) == std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
    CHECK(philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}) ==
          std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
    CHECK(philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
          std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

TEST_CASE("the random stream depends only on (seed, stream, position)") {
    CHECK(philox_uniform(7, 0, 10) == philox_uniform(7, 0, 10));
    CHECK(philox_uniform(7, 0, 10) != philox_uniform(8, 0, 10));
    CHECK(philox_uniform(7, 0, 10) != philox_uniform(7, 1, 10));
    CHECK(philox_uniform(7, 0, 10) != philox_uniform(7, 0, 11));
    double mean = 0;
    for (int i = 0; i < 10000; ++i) {
        const float u = philox_uniform(1, 0, i);
        REQUIRE(u >= 0.0f);
        REQUIRE(u < 1.0f);
        mean += u / 10000;
    }
    CHECK(std::fabs(mean - 0.5) < 0.01);
}

namespace {
int32_t sample(std::vector<float> logits, const SamplingParams& p, int64_t pos = 0, std::vector<int32_t> prompt = {},
               std::vector<int32_t> out = {}) {
    SamplingRow row{&p, 0, pos, prompt, out};
    return sample_row(logits, row);
}
}  // namespace

TEST_CASE("greedy, top-k 1 and a dominant logit agree") {
    const std::vector<float> logits = {0.1f, 2.0f, -1.0f, 1.9f, 2.0f};
    SamplingParams greedy;
    greedy.temperature = 0;
    CHECK(sample(logits, greedy) == 1);  // first of the tied maxima
    SamplingParams k1;
    k1.top_k = 1;
    for (int pos = 0; pos < 20; ++pos) CHECK(sample(logits, k1, pos) == 1);
}

TEST_CASE("sampling follows the softmax, and the filters remove what they should") {
    const std::vector<float> logits = {1.0f, 0.0f, 2.0f, -1.0f};
    std::vector<double> p(4);
    double z = 0;
    for (int i = 0; i < 4; ++i) z += p[i] = std::exp(logits[i]);
    for (auto& x : p) x /= z;

    SamplingParams plain;
    plain.seed = 42;
    std::map<int32_t, int> counts;
    const int n = 20000;
    for (int pos = 0; pos < n; ++pos) ++counts[sample(logits, plain, pos)];
    for (int i = 0; i < 4; ++i) CHECK(std::fabs(double(counts[i]) / n - p[i]) < 0.015);

    SamplingParams top_p = plain;
    top_p.top_p = 0.7f;  // p sorted: 0.64, 0.24, ... -> keeps {2, 0}
    SamplingParams min_p = plain;
    min_p.min_p = 0.3f;  // keeps tokens with p >= 0.3 * 0.64 = 0.19 -> {2, 0}
    SamplingParams top_k = plain;
    top_k.top_k = 2;
    for (const SamplingParams* sp : {&top_p, &min_p, &top_k}) {
        std::map<int32_t, int> c;
        for (int pos = 0; pos < 4000; ++pos) ++c[sample(logits, *sp, pos)];
        CHECK(c[1] == 0);
        CHECK(c[3] == 0);
        CHECK(c[0] > 0);
        CHECK(std::fabs(double(c[2]) / 4000 - p[2] / (p[2] + p[0])) < 0.03);
    }
}

TEST_CASE("penalties and logit bias follow vLLM's definitions") {
    SamplingParams g;
    g.temperature = 0;
    // Repetition: a positive logit is divided, a negative one multiplied; prompt tokens count.
    g.repetition_penalty = 2.0f;
    CHECK(sample({3.0f, 2.0f}, g, 0, {0}) == 1);    // 3/2 < 2
    CHECK(sample({-1.0f, -1.5f}, g, 0, {0}) == 1);  // -2 < -1.5
    g.repetition_penalty = 1.0f;
    // Presence and frequency count only generated tokens.
    g.presence_penalty = 0.5f;
    CHECK(sample({3.0f, 2.8f}, g, 0, {0}, {}) == 0);
    CHECK(sample({3.0f, 2.8f}, g, 0, {}, {0}) == 1);
    g.presence_penalty = 0;
    g.frequency_penalty = 0.1f;
    CHECK(sample({3.0f, 2.85f}, g, 0, {}, {0}) == 0);        // 3 - 0.1 > 2.85
    CHECK(sample({3.0f, 2.85f}, g, 0, {}, {0, 0}) == 1);     // 3 - 0.2 < 2.85
    g.frequency_penalty = 0;
    g.logit_bias = {{1, 5.0f}};
    CHECK(sample({3.0f, 0.0f}, g, 0) == 1);
}

TEST_CASE("out-of-range parameters are rejected with the parameter's name") {
    SamplingParams p;
    p.top_p = 0;
    CHECK_THROWS_WITH_AS(p.validate(10), doctest::Contains("top_p"), std::invalid_argument);
    p = {};
    p.temperature = -1;
    CHECK_THROWS_WITH_AS(p.validate(10), doctest::Contains("temperature"), std::invalid_argument);
    p = {};
    p.logit_bias = {{10, 1.0f}};
    CHECK_THROWS_WITH_AS(p.validate(10), doctest::Contains("logit_bias"), std::invalid_argument);
    p = {};
    CHECK_NOTHROW(p.validate(10));
}

TEST_CASE("per-row processors: suppressed ids and an allowed-token bitmask") {
    std::vector<float> logits(70, 0.0f);
    logits[5] = 9.0f;
    logits[40] = 8.0f;
    logits[66] = 7.0f;
    SamplingParams greedy;
    greedy.temperature = 0;
    auto pick = [&](SamplingRow row) {
        std::vector<float> l = logits;
        row.params = &greedy;
        return sample_row(l, row);
    };
    CHECK(pick({}) == 5);
    const std::vector<int32_t> suppressed = {5};
    CHECK(pick({.suppressed_ids = suppressed}) == 40);
    // Bits 40 and 66 allowed: words 1 (bit 8) and 2 (bit 2).
    const std::vector<uint32_t> mask = {0u, 1u << 8, 1u << 2};
    CHECK(pick({.allowed_mask = mask}) == 40);
    const std::vector<int32_t> no40 = {40};
    CHECK(pick({.suppressed_ids = no40, .allowed_mask = mask}) == 66);
    // Sampled (not greedy) rows respect the mask too.
    SamplingParams hot;
    hot.temperature = 5.0f;
    for (int pos = 0; pos < 50; ++pos) {
        std::vector<float> l = logits;
        SamplingRow row{.params = &hot, .position = pos, .allowed_mask = mask};
        const int32_t t = sample_row(l, row);
        CHECK((t == 40 || t == 66));
    }
}
