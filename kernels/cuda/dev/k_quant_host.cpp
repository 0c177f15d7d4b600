#include "kernels/cuda/dev/k_quant_host.h"

#include <cstring>
#include <random>

#include "kernels/formats/quant.h"

namespace dev {

namespace {
minfer::GGMLType ggml(KQuant t) { return t == KQuant::Q4_K ? minfer::GGMLType::Q4_K : minfer::GGMLType::Q6_K; }
}  // namespace

int file_block_bytes(KQuant t) { return t == KQuant::Q4_K ? 144 : 210; }
int device_block_bytes(KQuant t) { return t == KQuant::Q4_K ? 144 : 224; }

std::vector<uint8_t> k_quant_random_rows(KQuant t, int32_t n, int32_t k, uint32_t seed) {
    const size_t row_bytes = size_t(k) / 256 * size_t(file_block_bytes(t));
    std::vector<uint8_t> rows(size_t(n) * row_bytes);
    std::mt19937 gen(seed);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    std::vector<float> row(static_cast<size_t>(k));
    for (int32_t f = 0; f < n; ++f) {
        for (float& v : row) v = normal(gen);
        minfer::quantize_row(ggml(t), row.data(), &rows[size_t(f) * row_bytes], k);
    }
    return rows;
}

std::vector<uint8_t> device_layout(KQuant t, const std::vector<uint8_t>& file_rows) {
    const size_t from = size_t(file_block_bytes(t)), to = size_t(device_block_bytes(t)), blocks = file_rows.size() / from;
    std::vector<uint8_t> out(blocks * to, 0);
    for (size_t b = 0; b < blocks; ++b) std::memcpy(&out[b * to], &file_rows[b * from], from);
    return out;
}

std::vector<double> k_quant_reference(KQuant t, const std::vector<uint8_t>& rows, const std::vector<float>& x,
                                      int32_t n, int32_t k) {
    const size_t row_bytes = size_t(k) / 256 * size_t(file_block_bytes(t));
    std::vector<double> out(static_cast<size_t>(n));
    std::vector<float> w(static_cast<size_t>(k));
    for (int32_t f = 0; f < n; ++f) {
        minfer::dequantize_row(ggml(t), &rows[size_t(f) * row_bytes], w.data(), k);
        double acc = 0.0;
        for (int32_t i = 0; i < k; ++i) acc += double(w[size_t(i)]) * double(x[size_t(i)]);
        out[size_t(f)] = acc;
    }
    return out;
}

}  // namespace dev
