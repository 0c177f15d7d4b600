// Writes the fuzzer's seed corpus: a few tiny valid GGUF files that between
// them use every value type, several tensor types, two alignments, version 2,
// a vocab-only layout and the real metadata of the bundled model. Generated
// at build time so that no binary files live in the repository.
//
// usage: make_seeds OUT_DIR [stories260K.gguf]
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "tests/gguf_array.h"

using namespace minfer;
using minfer::test::array_value;

namespace {

std::vector<uint8_t> filler(size_t n) {
    std::vector<uint8_t> out(n);
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(i * 13 + 5);
    return out;
}

void save(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw GGUFError("cannot write " + path.string());
}

// Every value type, a few small tensors.
std::vector<uint8_t> all_types(uint32_t alignment) {
    GGUFWriter w(alignment);
    w.set_string("general.architecture", "llama");
    w.set_value("u8", {GGUFValueType::U8, uint64_t{7}});
    w.set_value("i8", {GGUFValueType::I8, int64_t{-7}});
    w.set_value("u16", {GGUFValueType::U16, uint64_t{700}});
    w.set_value("i16", {GGUFValueType::I16, int64_t{-700}});
    w.set_u32("u32", 70000);
    w.set_i32("i32", -70000);
    w.set_f32("f32", 1e-5f);
    w.set_bool("bool", true);
    w.set_u64("u64", 7000000000);
    w.set_value("i64", {GGUFValueType::I64, int64_t{-7000000000}});
    w.set_value("f64", {GGUFValueType::F64, 0.5});
    w.set_string_array("strings", {"<unk>", "<s>", "", "\xe2\x96\x81" "a"});
    w.set_f32_array("f32s", {0.0f, -1.0f});
    w.set_i32_array("i32s", {1, 2, 3});
    w.set_value("bools", array_value(GGUFValueType::BOOL, {0, 1}, 2));
    w.set_value("u16s", array_value(GGUFValueType::U16, {1, 0, 2, 0}, 2));
    w.add_tensor("a", GGMLType::F32, {4}, filler(16));
    w.add_tensor("b", GGMLType::F16, {2, 3}, filler(12));
    w.add_tensor("c", GGMLType::Q8_0, {32, 2}, filler(68));
    if (alignment != 32) w.add_tensor("d", GGMLType::Q6_K, {256}, filler(210));
    return w.to_bytes();
}

// A tokenizer-only file, like llama.cpp's ggml-vocab-*.gguf.
std::vector<uint8_t> vocab() {
    GGUFWriter w;
    w.set_string("general.architecture", "llama");
    w.set_string("tokenizer.ggml.model", "llama");
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    std::vector<float> scores = {0, 0, 0};
    std::vector<int32_t> types = {2, 3, 3};
    for (int i = 0; i < 8; ++i) {
        tokens.push_back("\xe2\x96\x81t" + std::to_string(i));
        scores.push_back(-static_cast<float>(i));
        types.push_back(1);
    }
    w.set_string_array("tokenizer.ggml.tokens", tokens);
    w.set_f32_array("tokenizer.ggml.scores", scores);
    w.set_i32_array("tokenizer.ggml.token_type", types);
    w.set_u32("tokenizer.ggml.bos_token_id", 1);
    w.set_bool("tokenizer.ggml.add_bos_token", true);
    return w.to_bytes();
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: make_seeds OUT_DIR [stories260K.gguf]\n");
        return 2;
    }
    try {
        const std::filesystem::path dir = argv[1];
        std::filesystem::create_directories(dir);
        save(dir / "all_types.gguf", all_types(32));
        save(dir / "align64.gguf", all_types(64));
        std::vector<uint8_t> v2 = all_types(32);
        v2[4] = 2;  // version 2 has the same layout
        save(dir / "version2.gguf", v2);
        save(dir / "vocab.gguf", vocab());
        save(dir / "empty.gguf", GGUFWriter().to_bytes());

        // The real model's header and metadata, with its tensor count set to 0
        // so that the 1 MB of weights can be left out.
        if (argc > 2) {
            const GGUFFile model = GGUFFile::open(argv[2]);
            std::vector<uint8_t> head(model.data_offset());
            std::ifstream in(argv[2], std::ios::binary);
            in.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size()));
            const uint64_t zero = 0;
            std::memcpy(head.data() + 8, &zero, 8);
            save(dir / "stories260K_metadata.gguf", head);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "make_seeds: %s\n", e.what());
        return 1;
    }
    return 0;
}
