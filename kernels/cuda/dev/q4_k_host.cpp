#include "kernels/cuda/dev/q4_k_host.h"

#include <random>

#include "kernels/formats/quant.h"

namespace dev {

std::vector<uint8_t> q4_k_random_rows(int32_t n, int32_t k, uint32_t seed) {
    const size_t row_bytes = size_t(k) / 256 * 144;
    std::vector<uint8_t> rows(size_t(n) * row_bytes);
    std::mt19937 gen(seed);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    std::vector<float> row(static_cast<size_t>(k));
    for (int32_t f = 0; f < n; ++f) {
        for (float& v : row) v = normal(gen);
        minfer::quantize_row(minfer::GGMLType::Q4_K, row.data(), &rows[size_t(f) * row_bytes], k);
    }
    return rows;
}

std::vector<double> q4_k_reference(const std::vector<uint8_t>& rows, const std::vector<float>& x, int32_t n, int32_t k) {
    const size_t row_bytes = size_t(k) / 256 * 144;
    std::vector<double> out(static_cast<size_t>(n));
    std::vector<float> w(static_cast<size_t>(k));
    for (int32_t f = 0; f < n; ++f) {
        minfer::dequantize_row(minfer::GGMLType::Q4_K, &rows[size_t(f) * row_bytes], w.data(), k);
        double acc = 0.0;
        for (int32_t i = 0; i < k; ++i) acc += double(w[size_t(i)]) * double(x[size_t(i)]);
        out[size_t(f)] = acc;
    }
    return out;
}

}  // namespace dev
