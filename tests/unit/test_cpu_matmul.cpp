// The fast CPU matmul (GEMV in the weight's format, panel GEMM) against the plain
// double-precision reference, for every weight type, odd shapes and row counts
// on both sides of the GEMV/GEMM switch.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "engine/quant.h"
#include "kernels/cpu/matmul.h"

using namespace minfer;
using namespace minfer::cpu;

namespace {

double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
        den += double(b[i]) * b[i];
    }
    return std::sqrt(num / den);
}

}  // namespace

TEST_CASE("cpu matmul equals the reference for every weight type") {
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    ThreadPool pool(3);  // more threads than this machine has cores: uneven splits get exercised
    struct TypeCase {
        GGMLType type;
        double gemv_tol;  // activations are quantized to int8 on the GEMV path of quantized types
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
                    const double tol = rows <= kGemvMaxRows ? tc.gemv_tol : 1e-5;
                    CHECK(rel_error(got, ref) < tol);
                }
            }
        }
    }
}
