// Weight shards (kernels/world.h): for every weight type the CPU backend runs,
// row shards and column shards packed without a copy multiply like the same
// slice of the dequantized matrix; row shards reproduce the whole matmul's
// columns bit for bit, column shards sum to it. Also World's core split and
// the errors of malformed shards.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/formats/quant.h"
#include "kernels/world.h"

using namespace minfer;

namespace {

double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
        den += double(b[i]) * b[i];
    }
    return std::sqrt(num / den);
}

// out[rows, n_out] = x[:, c0:c0+nc] * W[r0:r0+nr, c0:c0+nc]^T in double.
std::vector<float> reference(const std::vector<float>& x, const std::vector<float>& w, int64_t rows, int64_t K,
                             int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
    std::vector<float> out(size_t(rows * nr));
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t o = 0; o < nr; ++o) {
            double acc = 0;
            for (int64_t k = c0; k < c0 + nc; ++k) acc += double(x[r * K + k]) * w[(r0 + o) * K + k];
            out[r * nr + o] = float(acc);
        }
    return out;
}

struct Matrix {
    GGMLType type;
    int64_t N, K;
    std::vector<uint8_t> bytes;
    std::vector<float> deq;  // the quantized matrix widened back
    WeightView view() const { return {"w", type, N, K, bytes.data()}; }
};

Matrix random_matrix(GGMLType type, int64_t N, int64_t K, std::mt19937& rng) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    Matrix m{type, N, K, {}, {}};
    std::vector<float> wf(size_t(N * K));
    for (auto& v : wf) v = nd(rng);
    const size_t row_bytes = ggml_row_bytes(type, K);
    m.bytes.resize(row_bytes * N);
    m.deq.resize(wf.size());
    for (int64_t o = 0; o < N; ++o) {
        quantize_row(type, wf.data() + o * K, m.bytes.data() + o * row_bytes, K);
        dequantize_row(type, m.bytes.data() + o * row_bytes, m.deq.data() + o * K, K);
    }
    return m;
}

std::vector<float> run(Backend& b, const std::vector<float>& x, const PackedWeight& w, int32_t rows) {
    std::vector<float> out(size_t(rows) * w.rows);
    b.matmul(x.data(), w, nullptr, rows, out.data());
    return out;
}

std::vector<float> columns(const std::vector<float>& x, int64_t rows, int64_t K, int64_t c0, int64_t nc) {
    std::vector<float> s(size_t(rows * nc));
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < nc; ++k) s[r * nc + k] = x[r * K + c0 + k];
    return s;
}

}  // namespace

TEST_CASE("shard: row and column shards of every weight type match the dequantized matrix's slices") {
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    auto backend = make_cpu_backend(2);
    struct TypeCase {
        GGMLType type;
        double tol;  // against the dequantized matrix: quantized types quantize the activations too
    };
    const TypeCase types[] = {{GGMLType::F32, 1e-6}, {GGMLType::F16, 1e-6}, {GGMLType::BF16, 1e-6},
                              {GGMLType::Q8_0, 1e-2}, {GGMLType::Q4_0, 1e-2}, {GGMLType::Q4_1, 1e-2},
                              {GGMLType::Q5_0, 1e-2}, {GGMLType::Q5_1, 1e-2}, {GGMLType::Q4_K, 1e-2},
                              {GGMLType::Q5_K, 1e-2}, {GGMLType::Q6_K, 1e-2}};
    const int32_t rows = 5;
    for (const auto& tc : types) {
        const std::string type_name = ggml_type_name(tc.type);
        CAPTURE(type_name);
        const int64_t block = ggml_type_traits(uint32_t(tc.type))->block_elems;
        const int64_t K = block == 256 ? 1024 : 256, N = 48;
        const Matrix m = random_matrix(tc.type, N, K, rng);
        std::vector<float> x(size_t(rows * K));
        for (auto& v : x) v = nd(rng);

        const auto whole = backend->pack_weight(m.view());
        const auto full = run(*backend, x, *whole, rows);
        CHECK(rel_error(full, reference(x, m.deq, rows, K, 0, N, 0, K)) < tc.tol);
        // The default spec and count 1 are the whole matrix, bit for bit.
        CHECK(run(*backend, x, *backend->pack_weight(m.view(), ShardSpec{0, 0, 1}), rows) == full);
        CHECK(run(*backend, x, *backend->pack_weight(m.view(), ShardSpec{1, 0, 1}), rows) == full);

        for (int32_t count : {2, 3, 5}) {  // row shards: 3 and 5 do not divide 48 evenly
            CAPTURE(count);
            std::vector<float> joined(full.size());
            int64_t next_row = 0;
            for (int32_t i = 0; i < count; ++i) {
                const auto w = backend->pack_weight(m.view(), ShardSpec{0, i, count});
                REQUIRE(w->cols == K);
                const int64_t r0 = N * i / count;
                CHECK(r0 == next_row);
                const auto part = run(*backend, x, *w, rows);
                CHECK(rel_error(part, reference(x, m.deq, rows, K, r0, w->rows, 0, K)) < tc.tol);
                for (int64_t r = 0; r < rows; ++r)
                    for (int64_t o = 0; o < w->rows; ++o) joined[r * N + r0 + o] = part[r * w->rows + o];
                next_row += w->rows;
            }
            CHECK(next_row == N);
            CHECK(joined == full);  // row shards concatenate to the whole matmul exactly
        }
        for (int32_t count : {2, 4}) {  // column shards: whole blocks each
            CAPTURE(count);
            std::vector<double> sum(full.size(), 0.0);
            for (int32_t i = 0; i < count; ++i) {
                const auto w = backend->pack_weight(m.view(), ShardSpec{1, i, count});
                REQUIRE(w->rows == N);
                REQUIRE(w->cols == K / count);
                const int64_t c0 = i * K / count;
                const auto part = run(*backend, columns(x, rows, K, c0, w->cols), *w, rows);
                CHECK(rel_error(part, reference(x, m.deq, rows, K, 0, N, c0, w->cols)) < tc.tol);
                for (size_t j = 0; j < sum.size(); ++j) sum[j] += part[j];
            }
            CHECK(rel_error(std::vector<float>(sum.begin(), sum.end()), full) < 1e-5);
        }
    }
}

TEST_CASE("shard: a column shard off a quant-block boundary and malformed specs throw") {
    std::mt19937 rng(3);
    auto backend = make_cpu_backend(1);
    const Matrix q4 = random_matrix(GGMLType::Q4_0, 8, 256, rng);   // 8 blocks of 32 a row
    const Matrix q4k = random_matrix(GGMLType::Q4_K, 8, 512, rng);  // 2 super-blocks of 256
    CHECK_THROWS_AS(backend->pack_weight(q4.view(), ShardSpec{1, 0, 16}), std::invalid_argument);  // 16 wide
    CHECK_THROWS_AS(backend->pack_weight(q4.view(), ShardSpec{1, 1, 3}), std::invalid_argument);   // 256 / 3
    CHECK_THROWS_AS(backend->pack_weight(q4k.view(), ShardSpec{1, 0, 4}), std::invalid_argument);  // 128 wide
    CHECK_NOTHROW(backend->pack_weight(q4.view(), ShardSpec{1, 7, 8}));
    CHECK_NOTHROW(backend->pack_weight(q4k.view(), ShardSpec{1, 1, 2}));
    try {
        backend->pack_weight(q4.view(), ShardSpec{1, 0, 16});
    } catch (const std::invalid_argument& e) {
        const std::string what = e.what();
        CHECK(what.find("quant-block boundaries") != std::string::npos);
        CHECK(what.find("Q4_0") != std::string::npos);
    }
    CHECK_THROWS_AS(backend->pack_weight(q4.view(), ShardSpec{2, 0, 2}), std::invalid_argument);  // dim
    CHECK_THROWS_AS(backend->pack_weight(q4.view(), ShardSpec{0, 2, 2}), std::invalid_argument);  // index
    CHECK_THROWS_AS(backend->pack_weight(q4.view(), ShardSpec{0, 0, 0}), std::invalid_argument);  // count
    CHECK_THROWS_AS(backend->pack_weight(q4.view(), ShardSpec{0, 0, 9}), std::invalid_argument);  // > rows
}

TEST_CASE("shard: World splits this process's cores among the node's ranks") {
    const int cores = affinity_cores();
    CHECK(cores >= 1);
    CHECK(cpu_threads_for(World{}, 0) == cores);
    CHECK(cpu_threads_for(World{}, 3) == 3);  // an explicit count stands
    CHECK(cpu_threads_for(World{0, 2, 0, 2}, 0) == std::max(1, cores / 2));
    CHECK(cpu_threads_for(World{5, 1024, 5, 1024}, -1) == std::max(1, cores / 1024));  // at least 1
    CHECK(make_backend("cpu", 0, BackendOptions{WeightQuantization::None, World{1, 2, 1, 2}})->name() == "cpu");
}
