// What the GGUF tests share: the files they read, byte-level access to an
// image, and a small writer-made file with every value type.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "../gguf_array.h"
#include "engine/gguf/gguf.h"

namespace minfer::gguf_test {

using minfer::test::array_value;

inline const std::string kModel = std::string(MINFER_SOURCE_DIR) + "/models/stories260K.gguf";
inline const std::string kVocabDir = std::string(MINFER_SHARED_DIR) + "/vocab";

inline std::vector<uint8_t> read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE_MESSAGE(in.good(), "cannot read " << path);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

template <typename T>
inline std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
    std::vector<uint8_t> out(v.size() * sizeof(T));
    std::memcpy(out.data(), v.data(), out.size());
    return out;
}

template <typename T>
inline void put_at(std::vector<uint8_t>& b, size_t at, T v) {
    std::memcpy(b.data() + at, &v, sizeof(T));
}
template <typename T>
inline T get_at(const std::vector<uint8_t>& b, size_t at) {
    T v;
    std::memcpy(&v, b.data() + at, sizeof(T));
    return v;
}

// Deterministic filler for tensor data.
inline std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
    std::vector<uint8_t> out(n);
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(seed + i * 7);
    return out;
}

// A small file with every value type, two keys and two tensor names that the
// duplicate tests can turn into copies of each other, and several tensor types.
inline GGUFWriter small_writer(uint32_t alignment = 32) {
    GGUFWriter w(alignment);
    w.set_string("general.architecture", "llama");
    w.set_string("general.name", "small test file");
    w.set_value("v.u8", {GGUFValueType::U8, uint64_t{200}});
    w.set_value("v.i8", {GGUFValueType::I8, int64_t{-100}});
    w.set_value("v.u16", {GGUFValueType::U16, uint64_t{60000}});
    w.set_value("v.i16", {GGUFValueType::I16, int64_t{-30000}});
    w.set_u32("v.u32", 4000000000u);
    w.set_i32("v.i32", -2000000000);
    w.set_f32("v.f32", 0.25f);
    w.set_bool("v.bool", true);
    w.set_u64("v.u64", 18000000000000000000ull);
    w.set_value("v.i64", {GGUFValueType::I64, int64_t{-9000000000000000000}});
    w.set_value("v.f64", {GGUFValueType::F64, 1e300});
    w.set_string_array("v.strings", {"<unk>", "", "\xe2\x96\x81hello", "<0x0A>"});
    w.set_f32_array("v.f32s", {1.5f, -2.0f, 3.25f});
    w.set_i32_array("v.i32s", {-1, 0, 7});
    w.set_value("v.bools", array_value(GGUFValueType::BOOL, {1, 0, 1}, 3));
    w.set_value("v.u8s", array_value(GGUFValueType::U8, {9, 255}, 2));
    w.set_value("v.u64s", array_value(GGUFValueType::U64, bytes_of<uint64_t>({5, 6}), 2));
    w.set_value("v.f64s", array_value(GGUFValueType::F64, bytes_of<double>({0.5, -8.0}), 2));
    w.set_value("v.empty", array_value(GGUFValueType::I16, {}, 0));
    w.set_u32("dup.a", 1);
    w.set_u32("dup.b", 2);
    w.add_tensor("t.a", GGMLType::F32, {3}, pattern(12, 1));
    w.add_tensor("t.b", GGMLType::F16, {4, 2}, pattern(16, 2));
    w.add_tensor("q8", GGMLType::Q8_0, {64, 3}, pattern(2 * 34 * 3, 3));
    w.add_tensor("q4k", GGMLType::Q4_K, {256, 1, 2}, pattern(144 * 2, 4));
    w.add_tensor("i32", GGMLType::I32, {5}, pattern(20, 5));
    return w;
}

}  // namespace minfer::gguf_test
