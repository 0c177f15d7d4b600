// The host side of minfer_dev_q4_k_gemv that needs the CPU backend's formats
// (kernels/formats, C++20: the .cu files compile as C++17). Declarations only.
#pragma once

#include <cstdint>
#include <vector>

namespace dev {

// n rows of k normal(0, 0.02) weights through the CPU's Q4_K quantizer:
// n * k / 256 blocks of 144 bytes, row after row.
std::vector<uint8_t> q4_k_random_rows(int32_t n, int32_t k, uint32_t seed);

// out[f] = sum_i w[f, i] * x[i] in double, w the CPU's dequantization of the rows.
std::vector<double> q4_k_reference(const std::vector<uint8_t>& rows, const std::vector<float>& x, int32_t n, int32_t k);

}  // namespace dev
