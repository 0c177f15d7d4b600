// quant_tool: our reference quantizers and dequantizers (kernels/formats/quant.h) on raw
// files, so Python tests can compare them with independent oracles (gguf-py).
//
//   quant_tool dequant TYPE IN.bin OUT.f32   raw blocks in, float32 (native, little-endian) out
//   quant_tool quant   TYPE IN.f32 OUT.bin   float32 in, raw blocks out
//
// TYPE is a ggml type name (Q4_K, q8_0, F16, ...) or its numeric id. Errors
// print one line on stderr and exit 1; bad usage exits 2.
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "kernels/formats/quant.h"

using namespace minfer;

namespace {

GGMLType parse_type(const std::string& s) {
    std::string upper;
    for (char c : s) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    for (uint32_t id = 0; id < 64; ++id) {
        const GGMLTypeTraits* tr = ggml_type_traits(id);
        if (tr && (upper == tr->name || s == std::to_string(id))) return static_cast<GGMLType>(id);
    }
    throw std::runtime_error("unknown type '" + s + "'");
}

std::vector<uint8_t> read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot open " + path);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_file(const std::string& path, const void* data, size_t n) {
    std::ofstream f(path, std::ios::binary);
    f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
    if (!f) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: quant_tool dequant|quant TYPE IN OUT\n");
        return 2;
    }
    try {
        const std::string mode = argv[1];
        const GGMLType t = parse_type(argv[2]);
        const GGMLTypeTraits& tr = *ggml_type_traits(static_cast<uint32_t>(t));
        const std::vector<uint8_t> in = read_file(argv[3]);
        if (mode == "dequant") {
            if (in.size() % tr.block_bytes != 0)
                throw std::runtime_error(std::to_string(in.size()) + " bytes is not a whole number of " + tr.name + " blocks");
            const int64_t n = static_cast<int64_t>(in.size()) / tr.block_bytes * tr.block_elems;
            std::vector<float> out(n);
            dequantize_row(t, in.data(), out.data(), n);
            write_file(argv[4], out.data(), out.size() * sizeof(float));
        } else if (mode == "quant") {
            if (in.size() % sizeof(float) != 0) throw std::runtime_error("input is not a whole number of float32");
            const int64_t n = static_cast<int64_t>(in.size() / sizeof(float));
            std::vector<float> x(n);
            std::memcpy(x.data(), in.data(), in.size());
            std::vector<uint8_t> out(ggml_row_bytes(t, n));  // throws on a partial block (checked again below)
            quantize_row(t, x.data(), out.data(), n);
            write_file(argv[4], out.data(), out.size());
        } else {
            std::fprintf(stderr, "usage: quant_tool dequant|quant TYPE IN OUT\n");
            return 2;
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "quant_tool: %s\n", e.what());
        return 1;
    }
    return 0;
}
