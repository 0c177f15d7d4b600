// GGUF reader and writer on good input: type traits, round trips, accessors and
// the real files we ship. Malformed input is in test_gguf_damage.cpp.
#include <doctest/doctest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <typeinfo>
#include <vector>

#include "engine/gguf/gguf.h"
#include "gguf_test_util.h"

using namespace minfer;
using namespace minfer::gguf_test;

// ---- type traits -------------------------------------------------------------------

TEST_CASE("gguf: ggml type traits match gguf-py's GGML_QUANT_SIZES") {
    struct Row {
        GGMLType t;
        const char* name;
        int64_t elems, bytes;
    };
    const Row rows[] = {
        {GGMLType::F32, "F32", 1, 4},      {GGMLType::F16, "F16", 1, 2},       {GGMLType::BF16, "BF16", 1, 2},
        {GGMLType::Q4_0, "Q4_0", 32, 18},  {GGMLType::Q4_1, "Q4_1", 32, 20},   {GGMLType::Q5_0, "Q5_0", 32, 22},
        {GGMLType::Q5_1, "Q5_1", 32, 24},  {GGMLType::Q8_0, "Q8_0", 32, 34},   {GGMLType::Q8_1, "Q8_1", 32, 40},
        {GGMLType::Q2_K, "Q2_K", 256, 84}, {GGMLType::Q3_K, "Q3_K", 256, 110}, {GGMLType::Q4_K, "Q4_K", 256, 144},
        {GGMLType::Q5_K, "Q5_K", 256, 176}, {GGMLType::Q6_K, "Q6_K", 256, 210}, {GGMLType::Q8_K, "Q8_K", 256, 292},
        {GGMLType::I8, "I8", 1, 1},        {GGMLType::I16, "I16", 1, 2},       {GGMLType::I32, "I32", 1, 4},
        {GGMLType::I64, "I64", 1, 8},      {GGMLType::F64, "F64", 1, 8},
    };
    for (const Row& r : rows) {
        const GGMLTypeTraits* tr = ggml_type_traits(static_cast<uint32_t>(r.t));
        REQUIRE(tr != nullptr);
        CHECK(std::string(tr->name) == r.name);
        CHECK(std::string(ggml_type_name(r.t)) == r.name);
        CHECK(tr->block_elems == r.elems);
        CHECK(tr->block_bytes == r.bytes);
        CHECK(ggml_row_bytes(r.t, r.elems * 3) == static_cast<uint64_t>(r.bytes * 3));
    }
    for (uint32_t unknown : {4u, 5u, 16u, 29u, 31u, 1000u}) CHECK(ggml_type_traits(unknown) == nullptr);
    CHECK(std::string(ggml_type_name(static_cast<GGMLType>(4))) == "?");
    CHECK(ggml_row_bytes(GGMLType::F32, 172) == 688);
    CHECK(ggml_row_bytes(GGMLType::Q8_0, 0) == 0);
    CHECK_THROWS_WITH_AS(ggml_row_bytes(GGMLType::Q8_0, 172), doctest::Contains("172"), GGUFError);
    CHECK_THROWS_AS(ggml_row_bytes(GGMLType::Q4_K, -256), GGUFError);
    CHECK_THROWS_AS(ggml_row_bytes(static_cast<GGMLType>(99), 32), GGUFError);
    CHECK(std::string(gguf_value_type_name(GGUFValueType::F32)) == "f32");
    CHECK(std::string(gguf_value_type_name(static_cast<GGUFValueType>(77))) == "?");
}

// ---- writer round trips --------------------------------------------------------------

TEST_CASE("gguf: every value type survives a round trip, in insertion order") {
    const std::vector<uint8_t> bytes = small_writer().to_bytes();
    const GGUFFile f = GGUFFile::parse(bytes);
    CHECK(f.version() == 3);
    CHECK(f.alignment() == 32);
    CHECK(f.file_size() == bytes.size());

    const std::vector<std::string> keys = {
        "general.architecture", "general.name", "v.u8", "v.i8", "v.u16", "v.i16", "v.u32", "v.i32",
        "v.f32", "v.bool", "v.u64", "v.i64", "v.f64", "v.strings", "v.f32s", "v.i32s", "v.bools",
        "v.u8s", "v.u64s", "v.f64s", "v.empty", "dup.a", "dup.b"};  // 32-byte alignment: no general.alignment
    REQUIRE(f.metadata().size() == keys.size());
    for (size_t i = 0; i < keys.size(); ++i) CHECK(f.metadata()[i].first == keys[i]);

    CHECK(f.get_string("general.architecture") == "llama");
    CHECK(f.find("v.u8")->type == GGUFValueType::U8);
    CHECK(f.get_uint("v.u8") == 200);
    CHECK(f.find("v.i8")->type == GGUFValueType::I8);
    CHECK(f.get_int("v.i8") == -100);
    CHECK(f.get_uint("v.u16") == 60000);
    CHECK(f.get_int("v.i16") == -30000);
    CHECK(f.get_uint("v.u32") == 4000000000u);
    CHECK(f.get_int("v.i32") == -2000000000);
    CHECK(f.get_float("v.f32") == 0.25);
    CHECK(f.get_bool("v.bool") == true);
    CHECK(f.get_uint("v.u64") == 18000000000000000000ull);
    CHECK(f.get_int("v.i64") == -9000000000000000000);
    CHECK(f.get_float("v.f64") == 1e300);
    CHECK(f.get_string_array("v.strings") == std::vector<std::string>{"<unk>", "", "\xe2\x96\x81hello", "<0x0A>"});
    CHECK(f.get_f32_array("v.f32s") == std::vector<float>{1.5f, -2.0f, 3.25f});
    CHECK(f.get_int_array("v.i32s") == std::vector<int64_t>{-1, 0, 7});
    CHECK(f.get_array("v.bools").raw == std::vector<uint8_t>{1, 0, 1});
    CHECK(f.get_int_array("v.u8s") == std::vector<int64_t>{9, 255});
    CHECK(f.get_int_array("v.u64s") == std::vector<int64_t>{5, 6});
    CHECK(f.get_f32_array("v.f64s") == std::vector<float>{0.5f, -8.0f});
    CHECK(f.get_array("v.empty").count == 0);
    CHECK(f.get_array("v.empty").elem_type == GGUFValueType::I16);

    // Copying every value through set_value reproduces the file byte for byte.
    GGUFWriter copy;
    for (const auto& [k, v] : f.metadata()) copy.set_value(k, v);
    for (const GGUFTensorInfo& t : f.tensors())
        copy.add_tensor(t.name, t.type, t.ne, std::vector<uint8_t>(t.data, t.data + t.nbytes));
    CHECK(copy.to_bytes() == bytes);
}

TEST_CASE("gguf: a file without tensors ends right after its metadata") {
    GGUFWriter w(1 << 30);  // no padding, whatever the alignment
    w.set_string("tokenizer.ggml.model", "llama");
    const std::vector<uint8_t> bytes = w.to_bytes();
    // header 24 + key (8 + 20) + type 4 + value (8 + 5) + general.alignment (8 + 17 + 4 + 4)
    CHECK(bytes.size() == 24 + 28 + 4 + 13 + 33);
    const GGUFFile f = GGUFFile::parse(bytes);
    CHECK(f.tensors().empty());
    CHECK(f.alignment() == 1u << 30);
    CHECK(f.get_string("tokenizer.ggml.model") == "llama");
}

TEST_CASE("gguf: setting a key twice replaces the value in place") {
    GGUFWriter w;
    w.set_u32("a", 1);
    w.set_u32("b", 2);
    w.set_string("a", "now a string");
    const std::vector<uint8_t> bytes = w.to_bytes();
    const GGUFFile f = GGUFFile::parse(bytes);
    REQUIRE(f.metadata().size() == 2);
    CHECK(f.metadata()[0].first == "a");
    CHECK(f.get_string("a") == "now a string");
}

TEST_CASE("gguf: tensors are packed in order, padded to the alignment") {
    for (uint32_t alignment : {1u, 8u, 32u, 64u, 4096u}) {
        CAPTURE(alignment);
        const std::vector<uint8_t> bytes = small_writer(alignment).to_bytes();
        const GGUFFile f = GGUFFile::parse(bytes);
        CHECK(f.alignment() == alignment);
        CHECK(f.has("general.alignment") == (alignment != 32));
        if (alignment != 32) CHECK(f.get_uint("general.alignment") == alignment);
        CHECK(f.data_offset() % alignment == 0);
        CHECK(bytes.size() % alignment == 0);  // trailing padding after the last tensor

        REQUIRE(f.tensors().size() == 5);
        const char* names[] = {"t.a", "t.b", "q8", "q4k", "i32"};
        uint64_t expect_offset = 0;
        uint8_t seed = 1;
        for (size_t i = 0; i < 5; ++i) {
            const GGUFTensorInfo& t = f.tensors()[i];
            CHECK(t.name == names[i]);
            CHECK(t.offset == expect_offset);  // llama.cpp's strict packing rule
            CHECK(t.data == bytes.data() + f.data_offset() + t.offset);
            CHECK(std::vector<uint8_t>(t.data, t.data + t.nbytes) == pattern(t.nbytes, seed++));
            expect_offset += (t.nbytes + alignment - 1) / alignment * alignment;
        }
        CHECK(f.data_offset() + expect_offset == bytes.size());
        const GGUFTensorInfo& q4k = f.tensor("q4k");
        CHECK(q4k.type == GGMLType::Q4_K);
        CHECK(q4k.ne == std::vector<int64_t>{256, 1, 2});
        CHECK(q4k.n_elements() == 512);
        CHECK(q4k.rows() == 2);
        CHECK(q4k.nbytes == 288);
        CHECK(f.tensor("t.a").rows() == 1);
    }
}

TEST_CASE("gguf: write() and open() through a real file") {
    const auto dir = std::filesystem::temp_directory_path() / ("minfer_test_gguf_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "small.gguf").string();
    small_writer(64).write(path);
    {
        GGUFFile f = GGUFFile::open(path);
        CHECK(f.path() == path);
        CHECK(f.tensors().size() == 5);
        CHECK(f.alignment() == 64);
        // Moving the file keeps the mapping and the tensor pointers valid.
        const uint8_t* data = f.tensor("q8").data;
        GGUFFile moved = std::move(f);
        CHECK(moved.tensor("q8").data == data);
        CHECK(data[0] == pattern(1, 3)[0]);
    }
    CHECK_THROWS_WITH_AS(GGUFFile::open((dir / "missing.gguf").string()), doctest::Contains("missing.gguf: cannot open: No such file"), GGUFError);
    CHECK_THROWS_WITH_AS(GGUFFile::open(dir.string()), doctest::Contains("not a regular file"), GGUFError);
    const std::string empty = (dir / "empty.gguf").string();
    std::ofstream(empty).close();
    CHECK_THROWS_WITH_AS(GGUFFile::open(empty), doctest::Contains("empty.gguf: offset 0: truncated"), GGUFError);
    CHECK_THROWS_WITH_AS(GGUFWriter().write((dir / "no/such/dir.gguf").string()), doctest::Contains("cannot create"), GGUFError);
    std::filesystem::remove_all(dir);
}

TEST_CASE("gguf: the writer rejects what it cannot write") {
    CHECK_THROWS_AS(GGUFWriter(0), GGUFError);
    CHECK_THROWS_AS(GGUFWriter(48), GGUFError);
    GGUFWriter w;
    w.add_tensor("x", GGMLType::F32, {2}, pattern(8, 0));
    CHECK_THROWS_WITH_AS(w.add_tensor("x", GGMLType::F32, {2}, pattern(8, 0)), doctest::Contains("duplicate tensor name 'x'"), GGUFError);
    CHECK_THROWS_WITH_AS(w.add_tensor("y", GGMLType::F32, {2}, pattern(7, 0)), doctest::Contains("needs 8 bytes, got 7"), GGUFError);
    CHECK_THROWS_WITH_AS(w.add_tensor("y", GGMLType::Q8_0, {172}, {}), doctest::Contains("tensor 'y'"), GGUFError);
    CHECK_THROWS_AS(w.add_tensor("y", GGMLType::F32, {}, {}), GGUFError);
    CHECK_THROWS_AS(w.add_tensor("y", GGMLType::F32, {1, 1, 1, 1, 1}, pattern(4, 0)), GGUFError);
    CHECK_THROWS_AS(w.add_tensor("y", GGMLType::F32, {2, 0}, {}), GGUFError);
    CHECK_THROWS_AS(w.add_tensor("y", GGMLType::F32, {int64_t{1} << 40, int64_t{1} << 40}, {}), GGUFError);
    CHECK_THROWS_AS(w.add_tensor("y", static_cast<GGMLType>(4), {32}, pattern(20, 0)), GGUFError);
    CHECK_THROWS_AS(w.add_tensor(std::string(64, 'n'), GGMLType::F32, {1}, pattern(4, 0)), GGUFError);
    w.add_tensor(std::string(63, 'n'), GGMLType::F32, {1}, pattern(4, 0));

    CHECK_THROWS_AS(w.set_u32("general.alignment", 64), GGUFError);
    w.set_u32("general.alignment", 32);
    CHECK_THROWS_AS(w.set_value("k", {GGUFValueType::U8, uint64_t{256}}), GGUFError);
    CHECK_THROWS_AS(w.set_value("k", {GGUFValueType::I32, uint64_t{1}}), GGUFError);  // wrong alternative
    CHECK_THROWS_AS(w.set_value("k", {GGUFValueType::I8, int64_t{-129}}), GGUFError);
    CHECK_THROWS_AS(w.set_value("k", {static_cast<GGUFValueType>(13), uint64_t{1}}), GGUFError);
    CHECK_THROWS_AS(w.set_value("k", array_value(GGUFValueType::ARRAY, {}, 0)), GGUFError);
    CHECK_THROWS_AS(w.set_value("k", array_value(GGUFValueType::U32, {1, 2, 3}, 1)), GGUFError);
    CHECK_THROWS_AS(w.set_value("k", array_value(GGUFValueType::BOOL, {2}, 1)), GGUFError);
    GGUFArray strings;
    strings.elem_type = GGUFValueType::STRING;
    strings.strings = {"a"};
    strings.count = 2;
    CHECK_THROWS_AS(w.set_value("k", {GGUFValueType::ARRAY, strings}), GGUFError);
    CHECK(GGUFFile::parse(w.to_bytes()).tensors().size() == 2);
}

// ---- accessors --------------------------------------------------------------------------

TEST_CASE("gguf: typed accessors convert what fits and name the key when they fail") {
    const std::vector<uint8_t> bytes = small_writer().to_bytes();
    const GGUFFile f = GGUFFile::parse(bytes, "small.gguf");

    // Integers cross signedness when the value fits.
    CHECK(f.get_int("v.u32") == 4000000000);
    CHECK(f.get_uint("dup.a") == 1);
    GGUFWriter w;
    w.set_i32("positive", 7);
    w.set_i32("negative", -7);
    const std::vector<uint8_t> wb = w.to_bytes();
    const GGUFFile g = GGUFFile::parse(wb, "g.gguf");
    CHECK(g.get_uint("positive") == 7);
    CHECK_THROWS_WITH_AS(g.get_uint("negative"), doctest::Contains("key 'negative' is -7 (i32), wanted an unsigned integer"), GGUFError);
    CHECK_THROWS_WITH_AS(f.get_int("v.u64"), doctest::Contains("key 'v.u64' is 18000000000000000000 (u64), too large"), GGUFError);

    // Missing keys and wrong types.
    CHECK_THROWS_WITH_AS(f.get_uint("llama.block_count"), "small.gguf: missing key 'llama.block_count'", GGUFError);
    CHECK_THROWS_WITH_AS(f.get_uint("general.name"), "small.gguf: key 'general.name' has type string, wanted an unsigned integer", GGUFError);
    CHECK_THROWS_WITH_AS(f.get_uint("v.bool"), doctest::Contains("key 'v.bool' has type bool, wanted an unsigned integer"), GGUFError);
    CHECK_THROWS_WITH_AS(f.get_int("v.f32"), doctest::Contains("key 'v.f32' has type f32, wanted an integer"), GGUFError);
    CHECK_THROWS_WITH_AS(f.get_float("v.u32"), doctest::Contains("key 'v.u32' has type u32, wanted a float"), GGUFError);
    CHECK_THROWS_WITH_AS(f.get_bool("v.u8"), doctest::Contains("key 'v.u8' has type u8, wanted a bool"), GGUFError);
    CHECK_THROWS_WITH_AS(f.get_string("v.strings"), doctest::Contains("key 'v.strings' has type array of string, wanted a string"), GGUFError);
    CHECK_THROWS_WITH_AS(f.get_array("v.u8"), doctest::Contains("key 'v.u8' has type u8, wanted an array"), GGUFError);
    CHECK_THROWS_WITH_AS(f.get_string_array("v.f32s"), doctest::Contains("key 'v.f32s' has type array of f32, wanted an array of string"), GGUFError);
    CHECK_THROWS_WITH_AS(f.get_f32_array("v.i32s"), doctest::Contains("key 'v.i32s' has type array of i32, wanted an array of f32"), GGUFError);
    CHECK_THROWS_WITH_AS(f.get_int_array("v.strings"), doctest::Contains("key 'v.strings' has type array of string, wanted an array of integers"), GGUFError);
    CHECK_THROWS_WITH_AS(f.get_int_array("v.bools"), doctest::Contains("wanted an array of integers"), GGUFError);
    CHECK_THROWS_WITH_AS(f.get_f32_array("missing"), "small.gguf: missing key 'missing'", GGUFError);

    // Defaults only apply when the key is absent; a present key of the wrong type still throws.
    CHECK(f.get_uint_or("absent", 5) == 5);
    CHECK(f.get_uint_or("v.u8", 5) == 200);
    CHECK(f.get_float_or("absent", 1e4) == 1e4);
    CHECK(f.get_bool_or("absent", true) == true);
    CHECK(f.get_string_or("absent", "x") == "x");
    CHECK_THROWS_AS(f.get_uint_or("general.name", 5), GGUFError);

    CHECK(f.find_tensor("nope") == nullptr);
    CHECK_THROWS_WITH_AS(f.tensor("blk.0.attn_q.weight"), "small.gguf: missing tensor 'blk.0.attn_q.weight'", GGUFError);
}

// ---- real files ----------------------------------------------------------------------------

TEST_CASE("gguf: the bundled stories260K model") {
    const GGUFFile f = GGUFFile::open(kModel);
    CHECK(f.version() == 3);
    CHECK(f.alignment() == 32);
    CHECK(f.file_size() == 1054368);
    CHECK(f.data_offset() == 14240);

    CHECK(f.get_string("general.architecture") == "llama");
    CHECK(f.find("llama.block_count")->type == GGUFValueType::U32);  // llama.cpp reads u32 exactly
    CHECK(f.get_uint("llama.context_length") == 512);
    CHECK(f.get_uint("llama.embedding_length") == 64);
    CHECK(f.get_uint("llama.block_count") == 5);
    CHECK(f.get_uint("llama.feed_forward_length") == 172);
    CHECK(f.get_uint("llama.attention.head_count") == 8);
    CHECK(f.get_uint("llama.attention.head_count_kv") == 4);
    CHECK(f.get_uint("llama.rope.dimension_count") == 8);
    CHECK(f.get_float("llama.rope.freq_base") == 10000.0);
    CHECK(f.get_float("llama.attention.layer_norm_rms_epsilon") == doctest::Approx(1e-5).epsilon(1e-6));
    CHECK(f.get_string("tokenizer.ggml.model") == "llama");
    CHECK(f.get_uint("tokenizer.ggml.bos_token_id") == 1);
    CHECK(f.get_uint("tokenizer.ggml.eos_token_id") == 2);
    const auto& tokens = f.get_string_array("tokenizer.ggml.tokens");
    REQUIRE(tokens.size() == 512);
    CHECK(tokens[0] == "<unk>");
    CHECK(tokens[1] == "<s>");
    CHECK(tokens[2] == "</s>");
    CHECK(tokens[3] == "<0x00>");
    CHECK(f.get_f32_array("tokenizer.ggml.scores").size() == 512);
    CHECK(f.get_int_array("tokenizer.ggml.token_type").size() == 512);

    REQUIRE(f.tensors().size() == 47);
    CHECK(f.find_tensor("output.weight") == nullptr);  // tied to token_embd.weight
    CHECK(f.tensor("token_embd.weight").ne == std::vector<int64_t>{64, 512});
    CHECK(f.tensor("output_norm.weight").ne == std::vector<int64_t>{64});
    CHECK(f.tensor("blk.4.ffn_down.weight").ne == std::vector<int64_t>{172, 64});
    CHECK(f.tensor("blk.0.ffn_gate.weight").ne == std::vector<int64_t>{64, 172});
    CHECK(f.tensor("blk.0.attn_k.weight").ne == std::vector<int64_t>{64, 32});
    int64_t params = 0;
    uint64_t expect_offset = 0;
    for (const GGUFTensorInfo& t : f.tensors()) {
        CHECK(t.type == GGMLType::F32);
        CHECK(t.offset == expect_offset);
        expect_offset += (t.nbytes + 31) / 32 * 32;
        params += t.n_elements();
    }
    CHECK(params == 260032);  // "260K"
    CHECK(f.data_offset() + expect_offset == f.file_size());
    // The first weight of token_embd.weight, read through the mapping.
    const std::vector<uint8_t> bytes = read_file(kModel);  // parse() does not copy: keep the bytes alive
    const GGUFFile copy = GGUFFile::parse(bytes);
    float w0 = 0, w1 = 0;
    std::memcpy(&w0, f.tensor("token_embd.weight").data, 4);
    std::memcpy(&w1, copy.tensor("token_embd.weight").data, 4);
    CHECK(w0 == w1);
}

TEST_CASE("gguf: the vocab-only files in ../shared/vocab") {
    int n = 0;
    for (const auto& entry : std::filesystem::directory_iterator(kVocabDir)) {
        if (entry.path().extension() != ".gguf") continue;
        CAPTURE(entry.path().string());
        const GGUFFile f = GGUFFile::open(entry.path().string());
        CHECK(f.tensors().empty());
        CHECK(f.version() == 3);
        const std::string model = f.get_string("tokenizer.ggml.model");
        CHECK((model == "llama" || model == "gpt2" || model == "bert"));
        const auto& tokens = f.get_string_array("tokenizer.ggml.tokens");
        CHECK(tokens.size() > 1000);
        if (f.has("tokenizer.ggml.token_type")) CHECK(f.get_int_array("tokenizer.ggml.token_type").size() == tokens.size());
        if (f.has("tokenizer.ggml.scores")) CHECK(f.get_f32_array("tokenizer.ggml.scores").size() == tokens.size());
        if (model == "gpt2") CHECK(!f.get_string_array("tokenizer.ggml.merges").empty());
        ++n;
    }
    CHECK(n >= 12);
    // The llama SPM vocab has no padding after its metadata: it ends mid-"alignment".
    const GGUFFile spm = GGUFFile::open(kVocabDir + "/ggml-vocab-llama-spm.gguf");
    CHECK(spm.get_string_array("tokenizer.ggml.tokens").size() == 32000);
    CHECK(spm.file_size() == 723869);
    CHECK(spm.data_offset() == 723872);
}
