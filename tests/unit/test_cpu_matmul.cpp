// The CPU matmul (tiled dot products in the weight's format) against the plain
// double-precision reference, for every weight type, odd shapes and row
// counts; and its batch invariance: a row's output bits do not depend on the
// other rows, their number, or the thread count.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/formats/quant.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/vec_dot.h"
#include "../rel_error.h"

using namespace minfer;
using namespace minfer::cpu;

namespace {

using minfer::test::rel_error;

}  // namespace

TEST_CASE("cpu matmul equals the reference for every weight type") {
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    ThreadPool pool(3);  // more threads than this machine has cores: uneven splits get exercised
    struct TypeCase {
        GGMLType type;
        double tol;  // activations are quantized to int8 for quantized types
    };
    const TypeCase types[] = {{GGMLType::F32, 1e-6}, {GGMLType::F16, 1e-6}, {GGMLType::BF16, 1e-6},
                              {GGMLType::Q8_0, 1e-2}, {GGMLType::Q4_0, 1e-2}, {GGMLType::Q4_1, 1e-2},
                              {GGMLType::Q5_0, 1e-2}, {GGMLType::Q5_1, 1e-2}, {GGMLType::Q4_K, 1e-2},
                              {GGMLType::Q5_K, 1e-2}, {GGMLType::Q6_K, 1e-2}};
    for (const auto& tc : types) {
        const int64_t block = ggml_type_traits(uint32_t(tc.type))->block_elems;
        for (int64_t K : {block == 256 ? int64_t(256) : int64_t(64), block == 256 ? int64_t(768) : int64_t(96)}) {
            for (int64_t N : {16, 33, 100}) {
                std::vector<float> wf(size_t(N * K));
                for (auto& v : wf) v = nd(rng);
                const size_t row_bytes = ggml_row_bytes(tc.type, K);
                std::vector<uint8_t> wq(row_bytes * N);
                for (int64_t o = 0; o < N; ++o) quantize_row(tc.type, wf.data() + o * K, wq.data() + o * row_bytes, K);
                const MatmulWeight w{tc.type, N, K, wq.data(), row_bytes};
                std::vector<float> bias(N);
                for (auto& v : bias) v = nd(rng);
                for (int64_t rows : {1, 3, 5, 8, 17}) {
                    const std::string type_name = ggml_type_name(tc.type);
                    CAPTURE(type_name);
                    CAPTURE(K);
                    CAPTURE(N);
                    CAPTURE(rows);
                    std::vector<float> x(size_t(rows * K));
                    for (auto& v : x) v = nd(rng);
                    std::vector<float> got(size_t(rows * N), NAN), ref(size_t(rows * N));
                    const float* b = rows % 2 ? bias.data() : nullptr;
                    matmul(pool, w, x.data(), rows, b, got.data());
                    matmul_reference(w, x.data(), rows, b, ref.data());
                    CHECK(rel_error(got, ref) < tc.tol);
                }
            }
        }
    }
}

namespace {

struct RandomWeight {
    std::vector<uint8_t> bytes;
    MatmulWeight w;
};

RandomWeight random_weight(GGMLType type, int64_t N, int64_t K, std::mt19937& rng) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> wf(size_t(N * K));
    for (auto& v : wf) v = nd(rng);
    RandomWeight r;
    const size_t row_bytes = ggml_row_bytes(type, K);
    r.bytes.resize(row_bytes * N);
    for (int64_t o = 0; o < N; ++o) quantize_row(type, wf.data() + o * K, r.bytes.data() + o * row_bytes, K);
    r.w = {type, N, K, r.bytes.data(), row_bytes};
    return r;
}

const GGMLType kAllTypes[] = {GGMLType::F32,  GGMLType::F16,  GGMLType::BF16, GGMLType::Q8_0,
                              GGMLType::Q4_0, GGMLType::Q4_1, GGMLType::Q5_0, GGMLType::Q5_1,
                              GGMLType::Q4_K, GGMLType::Q5_K, GGMLType::Q6_K};

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

}  // namespace

TEST_CASE("cpu dot products: every tile element is the plain C++ statement of the arithmetic, bit for bit") {
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (GGMLType type : kAllTypes) {
        if (uses_panels(type)) continue;  // the next test
        const int64_t block = ggml_type_traits(uint32_t(type))->block_elems;
        // Odd block counts and float tails included.
        const std::vector<int64_t> lengths = block == 256 ? std::vector<int64_t>{256, 768}
                                             : block == 32 ? std::vector<int64_t>{32, 96, 128}
                                                           : std::vector<int64_t>{16, 37, 96, 130};
        for (int64_t K : lengths) {
            const std::string type_name = ggml_type_name(type);
            CAPTURE(type_name);
            CAPTURE(K);
            const TileShape ts = tile_shape(type);
            const auto rw = random_weight(type, ts.rn, K, rng);
            const ActFormat fmt = act_format(type);
            const size_t ab = act_row_bytes(fmt, K);
            std::vector<uint8_t> acts(ab * ts.rm);
            std::vector<float> x(static_cast<size_t>(K));
            for (int i = 0; i < ts.rm; ++i) {
                for (auto& v : x) v = nd(rng) * (i == 0 ? 1e-3f : 10.0f);  // scales far apart
                prepare_activations(fmt, x.data(), acts.data() + i * ab, K);
            }
            std::vector<float> spec(size_t(ts.rm * ts.rn));
            for (int i = 0; i < ts.rm; ++i)
                for (int j = 0; j < ts.rn; ++j) {
                    spec[i * ts.rn + j] = vec_dot_spec(type, rw.w.row(j), acts.data() + i * ab, K);
                    CHECK(same_bits(vec_dot(type, rw.w.row(j), acts.data() + i * ab, K), spec[i * ts.rn + j]));
                }
            for (int rm = 1; rm <= ts.rm; ++rm)
                for (int rn = 1; rn <= ts.rn; ++rn) {
                    CAPTURE(rm);
                    CAPTURE(rn);
                    std::vector<float> out(size_t(rm * rn));
                    dot_tile_fn(type, rm, rn)(rw.w.data, rw.w.row_bytes, acts.data(), ab, K, out.data(), rn);
                    for (int i = 0; i < rm; ++i)
                        for (int j = 0; j < rn; ++j) CHECK(same_bits(out[i * rn + j], spec[i * ts.rn + j]));
                }
        }
    }
}

TEST_CASE("cpu activations for K-quants are quantize_row(Q8_K)'s bytes") {
    std::mt19937 rng(17);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int64_t K = 1024;
    std::vector<float> x(static_cast<size_t>(K));
    for (int round = 0; round < 50; ++round) {
        for (auto& v : x) v = nd(rng) * float(1 + round % 9);
        if (round == 1) std::fill(x.begin(), x.begin() + 256, 0.0f);  // a block of zeros: scale 0
        if (round == 2)  // values halfway between levels: rounding ties
            for (int64_t k = 0; k < K; ++k) x[size_t(k)] = (k % 256 == 0 ? 127.0f : float(k % 7) - 2.5f);
        std::vector<uint8_t> got(act_row_bytes(ActFormat::Q8_K, K)), want(ggml_row_bytes(GGMLType::Q8_K, K));
        prepare_activations(ActFormat::Q8_K, x.data(), got.data(), K);
        quantize_row(GGMLType::Q8_K, x.data(), want.data(), K);
        CHECK(std::memcmp(got.data(), want.data(), want.size()) == 0);
    }
}

TEST_CASE("cpu panels: every tile element is the plain C++ statement of the arithmetic, bit for bit") {
    std::mt19937 rng(13);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (GGMLType type : {GGMLType::Q8_0, GGMLType::Q4_0, GGMLType::Q4_1, GGMLType::Q4_K}) {
        const std::vector<int64_t> lengths = type == GGMLType::Q4_K ? std::vector<int64_t>{256, 768}
                                                                     : std::vector<int64_t>{32, 96, 160};
        for (int64_t K : lengths) {
            const std::string type_name = ggml_type_name(type);
            CAPTURE(type_name);
            CAPTURE(K);
            const int64_t N = 7 * kPanelRows + 5;  // the last panel is part padding
            const auto rw = random_weight(type, N, K, rng);
            const PanelMatrix panels = pack_panels(rw.w);
            const size_t ab = panel_act_bytes(type, K);
            constexpr int kRows = 6;
            std::vector<uint8_t> acts(ab * kRows + 64);
            std::vector<float> x(static_cast<size_t>(K));
            for (int i = 0; i < kRows; ++i) {
                for (auto& v : x) v = nd(rng) * (i == 0 ? 1e-3f : 10.0f);  // scales far apart
                prepare_panel_activations(type, x.data(), acts.data() + i * ab, K);
                if (type == GGMLType::Q4_K) continue;  // the Q8_K activations: the test above
                // The quantization is lrintf's, whatever instructions compute it.
                const auto* a = reinterpret_cast<const ActQ8Block*>(acts.data() + i * ab);
                for (int64_t b = 0; b < K / 32; ++b) {
                    float amax = 0;
                    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
                    const float d = amax / 127.0f, inv = d > 0 ? 1.0f / d : 0.0f;
                    int32_t sum = 0;
                    for (int j = 0; j < 32; ++j) {
                        const int8_t q = int8_t(std::lrintf(x[32 * b + j] * inv));
                        CHECK(a[b].qs[j] == q);
                        sum += q;
                    }
                    CHECK(same_bits(a[b].d, d));
                    CHECK(a[b].sum == sum);
                }
            }
            for (bool one_row : {false, true}) {
                const PanelTileShape ts = panel_tile_shape(type, one_row);
                for (int rm = 1; rm <= ts.rm; ++rm)
                    for (int np = 1; np <= ts.np; ++np)
                        for (int64_t p0 : {int64_t(0), panels.panels - np}) {
                            CAPTURE(rm);
                            CAPTURE(np);
                            CAPTURE(p0);
                            const int64_t ldo = kPanelRows * np;
                            std::vector<float> out(size_t(rm * ldo), NAN);
                            panel_tile_fn(type, rm, np)(panels, p0, acts.data(), ab, out.data(), ldo);
                            int mismatches = 0;
                            for (int i = 0; i < rm; ++i) {
                                const uint8_t* a = acts.data() + i * ab;
                                for (int64_t c = 0; c < ldo; ++c) {
                                    const int64_t r = kPanelRows * p0 + c;
                                    const float want = r < N ? panel_dot_spec(panels, r, a) : 0.0f;
                                    mismatches += !same_bits(out[size_t(i * ldo + c)], want) && r < N;
                                }
                            }
                            CHECK(mismatches == 0);
                        }
            }
        }
    }
}

namespace {

// Every row of `rows`-row matmuls (random choices and orders of 100 rows, on
// 1, 2 and 3 threads) is compared bitwise with that row computed alone.
void check_batch_invariance(GGMLType type, int64_t N, int64_t K, std::mt19937& rng) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    ThreadPool one(1), two(2), three(3);
    constexpr int64_t kRows = 100;
    const auto rw = random_weight(type, N, K, rng);
    std::vector<float> bias(N);
    for (auto& v : bias) v = nd(rng);
    std::vector<float> x(size_t(kRows * K));
    for (int64_t r = 0; r < kRows; ++r)
        for (int64_t k = 0; k < K; ++k) x[r * K + k] = nd(rng) * float(1 + r % 7);
    // Every row alone, on one thread: the bits every other call must match.
    std::vector<float> alone(size_t(kRows * N));
    for (int64_t r = 0; r < kRows; ++r) matmul(one, rw.w, x.data() + r * K, 1, bias.data(), alone.data() + r * N);
    for (int64_t rows : {1, 2, 3, 5, 8, 13, 33, 100}) {
        CAPTURE(rows);
        for (ThreadPool* pool : {&one, &two, &three}) {
            CAPTURE(pool->size());
            std::vector<int64_t> pick(static_cast<size_t>(rows));  // repeats allowed
            for (auto& p : pick) p = std::uniform_int_distribution<int64_t>(0, kRows - 1)(rng);
            std::vector<float> batch(size_t(rows * K)), out(size_t(rows * N));
            for (int64_t i = 0; i < rows; ++i) std::copy_n(x.data() + pick[i] * K, K, batch.data() + i * K);
            matmul(*pool, rw.w, batch.data(), rows, bias.data(), out.data());
            int mismatches = 0;
            for (int64_t i = 0; i < rows; ++i)
                mismatches += std::memcmp(out.data() + i * N, alone.data() + pick[i] * N, N * sizeof(float)) != 0;
            CHECK(mismatches == 0);
        }
    }
}

}  // namespace

TEST_CASE("cpu matmul is batch invariant: a row's bits do not depend on the other rows or the thread count") {
    std::mt19937 rng(5);
    for (GGMLType type : kAllTypes) {
        const int64_t block = ggml_type_traits(uint32_t(type))->block_elems;
        const int64_t K = block == 256 ? 512 : block == 32 ? 160 : 100;  // 160: an odd number of 32-blocks
        const std::string type_name = ggml_type_name(type);
        CAPTURE(type_name);
        // 37: not a multiple of any tile width; 3: too few columns to go round, so rows are split too.
        for (int64_t N : {37, 3}) {
            CAPTURE(N);
            check_batch_invariance(type, N, K, rng);
        }
    }
}
