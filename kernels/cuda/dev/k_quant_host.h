// The host side of minfer_dev_k_quant_gemv that needs the CPU backend's formats
// (kernels/formats, C++20: the .cu files compile as C++17). Declarations only.
#pragma once

#include <cstdint>
#include <vector>

namespace dev {

enum class KQuant { Q4_K, Q6_K };

// Bytes of a block in the file (144, 210) and on the device (144, 224: the
// CUDA backend pads Q6_K's blocks to 16-byte multiples at upload).
int file_block_bytes(KQuant t);
int device_block_bytes(KQuant t);

// n rows of k normal(0, 0.02) weights through the CPU's quantizer, in the
// file's layout: n * k / 256 blocks, row after row.
std::vector<uint8_t> k_quant_random_rows(KQuant t, int32_t n, int32_t k, uint32_t seed);

// The same blocks as the device holds them (each padded with zeros to device_block_bytes).
std::vector<uint8_t> device_layout(KQuant t, const std::vector<uint8_t>& file_rows);

// out[f] = sum_i w[f, i] * x[i] in double, w the CPU's dequantization of the rows (file layout).
std::vector<double> k_quant_reference(KQuant t, const std::vector<uint8_t>& rows, const std::vector<float>& x,
                                      int32_t n, int32_t k);

}  // namespace dev
