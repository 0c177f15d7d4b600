// Synthetic models (engine/gguf/synth.h) as files: the presets' shapes against
// the real models, llama.cpp's Q4_K_M mix, determinism, every dtype encoding the
// same f32 values, the streamed file against the in-memory image, and the
// vocabulary. Large presets are checked through their plan and metadata only.
// Running the small ones is in test_synth_models.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kernels/formats/float16.h"
#include "engine/core/generate.h"
#include "engine/core/plan_builder.h"
#include "engine/gguf/gguf.h"
#include "engine/model/model.h"
#include "engine/model/model_runner.h"
#include "engine/gguf/model_source.h"
#include "kernels/formats/quant.h"
#include "engine/gguf/synth.h"
#include "engine/text/tokenizer.h"
#include "synth_test_util.h"

using namespace minfer;
using namespace minfer::synth_test;

namespace {

std::vector<uint8_t> read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE_MESSAGE(in.good(), "cannot read " << path);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

const SynthTensor& planned(const std::vector<SynthTensor>& plan, const std::string& name) {
    for (const SynthTensor& t : plan)
        if (t.name == name) return t;
    FAIL("no tensor " << name);
    return plan.front();
}

int64_t parameters(const std::vector<SynthTensor>& plan, bool with_rope_freqs = false) {
    int64_t n = 0;
    for (const SynthTensor& t : plan)
        if (with_rope_freqs || t.role != SynthRole::RopeFreqs) n += t.cols() * t.rows();
    return n;
}

// Layers whose `what` (attn_v / ffn_down) the plan stores as `type`.
std::set<int> layers_with(const std::vector<SynthTensor>& plan, const std::string& what, GGMLType type) {
    std::set<int> out;
    for (const SynthTensor& t : plan)
        if (t.name.find(what) != std::string::npos && t.type == type) out.insert(t.layer);
    return out;
}

}  // namespace


TEST_CASE("synth presets have the real models' shapes and parameter counts") {
    // Parameter counts as Hugging Face reports them (rope_freqs is not a parameter).
    CHECK(parameters(synth_plan(preset("l134m"), SynthDType::F32)) == 134105856);
    // llama3-1b is Llama 3.2 1B (1,235,814,400) with an untied output: + 128256 x 2048.
    CHECK(parameters(synth_plan(preset("llama3-1b"), SynthDType::F32)) == 1235814400 + 262668288);
    CHECK(parameters(synth_plan(preset("llama3-8b"), SynthDType::F32)) == 8030261248);
    CHECK(parameters(synth_plan(preset("qwen2-0.5b"), SynthDType::F32)) == 494032768);
    // The real gemma-3-270m GGUF holds 268,098,176 parameters in 236 tensors.
    CHECK(parameters(synth_plan(preset("gemma3-270m"), SynthDType::F32)) == 268098176);
    CHECK(synth_plan(preset("gemma3-270m"), SynthDType::F32).size() == 236);

    const auto l1 = synth_plan(preset("llama3-1b"), SynthDType::BF16);
    CHECK(l1.size() == 1 + 1 + 16 * 9 + 1 + 1);  // token_embd, rope_freqs, 16 blocks, output_norm, output
    CHECK(planned(l1, "rope_freqs.weight").ne == std::vector<int64_t>{32});
    CHECK(planned(l1, "rope_freqs.weight").type == GGMLType::F32);
    CHECK(planned(l1, "blk.15.attn_k.weight").ne == std::vector<int64_t>{2048, 512});
    CHECK(planned(l1, "blk.0.ffn_down.weight").ne == std::vector<int64_t>{8192, 2048});
    CHECK(planned(l1, "blk.0.ffn_down.weight").type == GGMLType::BF16);
    CHECK(planned(l1, "blk.0.ffn_norm.weight").type == GGMLType::F32);

    const auto l8 = synth_plan(preset("llama3-8b"), SynthDType::F16);
    CHECK(planned(l8, "output.weight").ne == std::vector<int64_t>{4096, 128256});
    CHECK(planned(l8, "rope_freqs.weight").ne == std::vector<int64_t>{64});  // head_dim 128
    CHECK(planned(l8, "blk.31.attn_v.weight").ne == std::vector<int64_t>{4096, 1024});

    const auto qw = synth_plan(preset("qwen2-0.5b"), SynthDType::F32);
    CHECK(planned(qw, "blk.23.attn_q.bias").ne == std::vector<int64_t>{896});
    CHECK(planned(qw, "blk.23.attn_k.bias").ne == std::vector<int64_t>{128});
    CHECK(planned(qw, "blk.0.attn_v.bias").type == GGMLType::F32);

    // Every matrix row length is a multiple of 32, so q8_0 applies everywhere
    // (experts included), but to the routers, which llama.cpp leaves F32.
    for (const SynthPreset& p : synth_presets())
        for (const SynthTensor& t : synth_plan(p, SynthDType::Q8_0)) {
            CAPTURE(t.name);
            const bool router = t.role == SynthRole::Router || t.role == SynthRole::SharedGate;
            CHECK(t.type == (t.ne.size() >= 2 && !router ? GGMLType::Q8_0 : GGMLType::F32));
        }
    // llama3-8b at f32 is 32 GB: more than an in-memory model can take on a small machine.
    CHECK(synth_image_size(preset("llama3-8b"), SynthDType::F32) > 32'000'000'000ull);
}

TEST_CASE("synth rope_freqs are Llama 3.1's scaling factors") {
    for (const char* name : {"llama3-1b", "llama3-8b"}) {
        const SynthPreset& p = preset(name);
        const std::vector<float> f = synth_rope_freqs(p);
        REQUIRE(f.size() == size_t(p.head_dim() / 2));
        CHECK(f.front() == 1.0f);             // short wavelengths are kept
        CHECK(f.back() == p.rope_factor);     // long ones slowed down by the factor
        CHECK(std::is_sorted(f.begin(), f.end()));
        // Band edges: wavelength 2*pi*base^(2i/n) below 8192/4 keeps 1, above 8192/1 takes the factor.
        for (size_t i = 0; i < f.size(); ++i) {
            const double wavelen = 2 * std::numbers::pi * std::pow(double(p.rope_base), 2.0 * i / p.head_dim());
            if (wavelen < 2048) CHECK(f[i] == 1.0f);
            if (wavelen > 8192) CHECK(f[i] == p.rope_factor);
            if (wavelen >= 2048 && wavelen <= 8192) CHECK((f[i] >= 1.0f && f[i] <= p.rope_factor));
        }
    }
    CHECK(synth_rope_freqs(preset("tiny")).empty());
    CHECK(synth_rope_freqs(preset("qwen2-0.5b")).empty());
}

TEST_CASE("synth q4_k_m reproduces llama.cpp's Q4_K_M mix") {
    const auto tiny = synth_plan(preset("tiny"), SynthDType::Q4_K_M);
    // use_more_bits(i, 2): only the last layer.
    CHECK(layers_with(tiny, "attn_v.weight", GGMLType::Q6_K) == std::set<int>{1});
    CHECK(layers_with(tiny, "ffn_down.weight", GGMLType::Q6_K) == std::set<int>{1});
    CHECK(planned(tiny, "blk.0.attn_v.weight").type == GGMLType::Q4_K);
    CHECK(planned(tiny, "token_embd.weight").type == GGMLType::Q4_K);  // untied: the default type
    CHECK(planned(tiny, "output.weight").type == GGMLType::Q6_K);
    for (const char* name : {"attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"})
        for (int l = 0; l < 2; ++l) CHECK(planned(tiny, fmt::format("blk.{}.{}.weight", l, name)).type == GGMLType::Q4_K);
    CHECK(planned(tiny, "blk.1.ffn_norm.weight").type == GGMLType::F32);

    const auto l134 = synth_plan(preset("l134m"), SynthDType::Q4_K_M);
    const std::set<int> more12 = {0, 3, 6, 9, 10, 11};  // n/8 = 1, 7n/8 = 10, (i - 1) % 3 == 2
    CHECK(layers_with(l134, "attn_v.weight", GGMLType::Q6_K) == more12);
    CHECK(layers_with(l134, "ffn_down.weight", GGMLType::Q6_K) == more12);
    CHECK(layers_with(l134, "attn_v.weight", GGMLType::Q4_K).size() == 6);
    CHECK(planned(l134, "output.weight").type == GGMLType::Q6_K);

    const auto l8 = synth_plan(preset("llama3-8b"), SynthDType::Q4_K_M);
    const std::set<int> more32 = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31};
    CHECK(layers_with(l8, "attn_v.weight", GGMLType::Q6_K) == more32);
    CHECK(layers_with(l8, "ffn_down.weight", GGMLType::Q6_K) == more32);
    CHECK(planned(l8, "token_embd.weight").type == GGMLType::Q4_K);
    CHECK(planned(l8, "output.weight").type == GGMLType::Q6_K);

    // Tied: token_embd is the output, so it takes the output's Q6_K.
    SynthPreset tied_1b = preset("llama3-1b");
    tied_1b.tied = true;
    CHECK(planned(synth_plan(tied_1b, SynthDType::Q4_K_M), "token_embd.weight").type == GGMLType::Q6_K);
    CHECK(planned(synth_plan(preset("llama3-1b"), SynthDType::Q4_K_M), "token_embd.weight").type == GGMLType::Q4_K);

    // Qwen2.5 0.5B: rows of 896 are not whole Q4_K blocks. The tied embedding
    // takes Q8_0 (the output rule), Q4_K falls back to Q5_0 and Q6_K to Q8_0;
    // ffn_down's rows (4864 = 19 x 256) keep the K types.
    const auto qw = synth_plan(preset("qwen2-0.5b"), SynthDType::Q4_K_M);
    const std::set<int> more24 = {0, 1, 2, 5, 8, 11, 14, 17, 20, 21, 22, 23};
    CHECK(planned(qw, "token_embd.weight").type == GGMLType::Q8_0);
    CHECK(layers_with(qw, "attn_v.weight", GGMLType::Q8_0) == more24);
    CHECK(layers_with(qw, "attn_v.weight", GGMLType::Q5_0).size() == 24 - more24.size());
    CHECK(layers_with(qw, "ffn_down.weight", GGMLType::Q6_K) == more24);
    CHECK(layers_with(qw, "ffn_down.weight", GGMLType::Q4_K).size() == 24 - more24.size());
    for (const char* name : {"attn_q.weight", "attn_k.weight", "attn_output.weight", "ffn_gate.weight", "ffn_up.weight"})
        CHECK(layers_with(qw, name, GGMLType::Q5_0).size() == 24);
    CHECK(planned(qw, "blk.3.attn_q.bias").type == GGMLType::F32);

    // The fallback table itself.
    CHECK(q4_k_m_type(SynthRole::AttnQ, 0, 8, 96, false) == GGMLType::Q5_0);
    CHECK(q4_k_m_type(SynthRole::AttnV, 0, 8, 96, false) == GGMLType::Q8_0);
    CHECK(q4_k_m_type(SynthRole::Output, 0, 8, 96, false) == GGMLType::Q8_0);
    CHECK(q4_k_m_type(SynthRole::Output, 0, 8, 512, false) == GGMLType::Q6_K);
}

TEST_CASE("synth metadata has the keys and types llama.cpp reads") {
    for (const SynthPreset& p : synth_presets()) {
        CAPTURE(p.name);
        const GGUFFile f = GGUFFile::from_bytes(synth_header(p, SynthDType::Q4_K_M, 7, false).to_bytes());
        const std::string a = std::string(p.arch) + ".";
        CHECK(f.get_string("general.architecture") == p.arch);
        CHECK(f.get_uint("general.file_type") == 15);
        for (const char* key : {"context_length", "embedding_length", "block_count", "feed_forward_length",
                                "attention.head_count", "attention.head_count_kv", "rope.dimension_count"})
            CHECK_MESSAGE(f.find(a + key)->type == GGUFValueType::U32, key);
        CHECK(f.find(a + "rope.freq_base")->type == GGUFValueType::F32);
        CHECK(f.find(a + "attention.layer_norm_rms_epsilon")->type == GGUFValueType::F32);
        CHECK(f.get_uint(a + "embedding_length") == uint64_t(p.dim));
        CHECK(f.get_uint(a + "attention.head_count_kv") == uint64_t(p.n_kv_heads));
        CHECK(f.get_uint(a + "rope.dimension_count") == uint64_t(p.head_dim()));
        CHECK(f.get_float(a + "rope.freq_base") == doctest::Approx(p.rope_base));
        CHECK(f.get_float(a + "attention.layer_norm_rms_epsilon") == doctest::Approx(p.norm_eps));
        CHECK(f.get_string("tokenizer.ggml.model") == "llama");
        CHECK(f.get_string_array("tokenizer.ggml.tokens").size() == size_t(p.vocab_size));
        CHECK(f.get_f32_array("tokenizer.ggml.scores").size() == size_t(p.vocab_size));
        CHECK(f.get_int_array("tokenizer.ggml.token_type").size() == size_t(p.vocab_size));
    }
    const SynthDType all[] = {SynthDType::F32, SynthDType::F16, SynthDType::BF16, SynthDType::Q8_0, SynthDType::Q4_K_M};
    const uint32_t ftypes[] = {0, 1, 32, 7, 15};
    for (size_t i = 0; i < std::size(all); ++i) CHECK(synth_llama_ftype(all[i]) == ftypes[i]);
}

TEST_CASE("synth specs") {
    CHECK(parse_synth_spec("l134m").preset == &preset("l134m"));
    CHECK(parse_synth_spec("l134m").dtype == SynthDType::F32);
    CHECK(parse_synth_spec("qwen2-0.5b:q4_k_m").dtype == SynthDType::Q4_K_M);
    CHECK_THROWS_WITH_AS(parse_synth_spec("l999m"), doctest::Contains("presets: tiny, l134m"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(parse_synth_spec("tiny:q3"), doctest::Contains("dtypes: f32"), std::invalid_argument);
}

TEST_CASE("synth output is deterministic: same seed, same bytes, whatever the thread count") {
    const SynthPreset& p = preset("tiny");
    for (SynthDType d : {SynthDType::F32, SynthDType::Q4_K_M}) {
        CAPTURE(synth_dtype_name(d));
        const auto a = synth_image(p, d, {.seed = 5, .threads = 1});
        CHECK(synth_image(p, d, {.seed = 5, .threads = 3}) == a);
        CHECK(a.size() == synth_image_size(p, d));
        const auto b = synth_image(p, d, {.seed = 6, .threads = 2});
        REQUIRE(b.size() == a.size());
        CHECK(b != a);
        // Not just the description: every tensor differs.
        const GGUFFile fa = GGUFFile::parse(a), fb = GGUFFile::parse(b);
        for (const GGUFTensorInfo& t : fa.tensors()) {
            if (t.name == "rope_freqs.weight") continue;
            CHECK_MESSAGE(std::memcmp(t.data, fb.tensor(t.name).data, t.nbytes) != 0, t.name);
        }
    }
}

TEST_CASE("synth file, in-memory image and --synthetic source are the same bytes") {
    const std::string path = temp_path("minfer_synth_tiny.gguf");
    for (SynthDType d : {SynthDType::F32, SynthDType::BF16, SynthDType::Q4_K_M}) {
        CAPTURE(synth_dtype_name(d));
        const uint64_t size = synth_write_file(preset("tiny"), d, path, {.seed = 0, .threads = 2});
        const std::vector<uint8_t> file = read_file(path);
        CHECK(file.size() == size);
        CHECK(file == synth_image(preset("tiny"), d));

        const GGUFFile from_file = open_model_source(path, "");
        const GGUFFile in_memory = open_model_source("ignored", std::string("tiny:") + synth_dtype_name(d));
        CHECK(in_memory.path() == std::string("synthetic:tiny:") + synth_dtype_name(d));
        REQUIRE(in_memory.tensors().size() == from_file.tensors().size());
        for (const GGUFTensorInfo& t : from_file.tensors()) {
            const GGUFTensorInfo& m = in_memory.tensor(t.name);
            CHECK(m.type == t.type);
            CHECK(m.ne == t.ne);
            CHECK(std::memcmp(m.data, t.data, t.nbytes) == 0);
        }
    }
    // weights = false: the metadata and tokenizer alone.
    const GGUFFile vocab_only = open_model_source("", "l134m", /*weights=*/false);
    CHECK(vocab_only.tensors().empty());
    CHECK(vocab_only.get_string_array("tokenizer.ggml.tokens").size() == 32000);
    CHECK_THROWS_AS(open_model_source("", "nope"), std::invalid_argument);
    std::filesystem::remove(path);
}

TEST_CASE("synth dtypes are conversions of the same f32 values") {
    // tiny (rows of 256 and 512) and a small qwen2 (rows of 160: Q5_0/Q8_0 fallbacks).
    for (const SynthPreset* p : {&preset("tiny"), &kSmallQwen2}) {
        CAPTURE(p->name);
        const GGUFFile f32 = GGUFFile::from_bytes(synth_image(*p, SynthDType::F32, {.seed = 3}));
        // The f32 values are synth_f32_row's, and have the statistics the generator promises.
        for (const SynthTensor& t : synth_plan(*p, SynthDType::F32)) {
            CAPTURE(t.name);
            std::vector<float> row(static_cast<size_t>(t.cols()));
            double sum = 0, sum2 = 0;
            for (int64_t r = 0; r < t.rows(); ++r) {
                synth_f32_row(*p, t, 3, r, row.data());
                REQUIRE(std::memcmp(row.data(), f32.tensor(t.name).data + r * t.cols() * 4, row.size() * 4) == 0);
                for (float v : row) sum += v, sum2 += double(v) * v;
            }
            const double n = double(t.cols()) * t.rows(), mean = sum / n, sd = std::sqrt(sum2 / n - mean * mean);
            if (t.role == SynthRole::Norm) {
                CHECK(mean == doctest::Approx(1.0).epsilon(0.02));
            } else if (t.ne.size() == 2) {
                CHECK(std::fabs(mean) < 5 * sd / std::sqrt(n));
                CHECK(sd == doctest::Approx(1.0 / std::sqrt(double(t.cols()))).epsilon(0.05));
            }
        }

        for (SynthDType d : {SynthDType::F16, SynthDType::BF16, SynthDType::Q8_0, SynthDType::Q4_K_M}) {
            CAPTURE(synth_dtype_name(d));
            const GGUFFile f = GGUFFile::from_bytes(synth_image(*p, d, {.seed = 3}));
            for (const SynthTensor& t : synth_plan(*p, d)) {
                CAPTURE(t.name);
                const GGUFTensorInfo& info = f.tensor(t.name);
                REQUIRE(info.type == t.type);
                const uint64_t row_bytes = ggml_row_bytes(t.type, t.cols());
                std::vector<float> x(static_cast<size_t>(t.cols())), y(x.size());
                std::vector<uint8_t> want(row_bytes);
                std::vector<float> all_x, all_y;
                for (int64_t r = 0; r < t.rows(); ++r) {
                    std::memcpy(x.data(), f32.tensor(t.name).data + r * t.cols() * 4, x.size() * 4);
                    const uint8_t* got = info.data + r * row_bytes;
                    // The bytes are exactly the conversion of the f32 row...
                    if (t.type == GGMLType::F32) {
                        std::memcpy(want.data(), x.data(), row_bytes);
                    } else if (t.type == GGMLType::F16 || t.type == GGMLType::BF16) {
                        for (size_t i = 0; i < x.size(); ++i) {
                            const uint16_t h = t.type == GGMLType::F16 ? f32_to_fp16(x[i]) : f32_to_bf16(x[i]);
                            std::memcpy(want.data() + 2 * i, &h, 2);
                        }
                    } else {
                        quantize_row(t.type, x.data(), want.data(), t.cols());
                    }
                    REQUIRE(std::memcmp(got, want.data(), row_bytes) == 0);
                    // ...and decode to values close to it.
                    dequantize_row(t.type, got, y.data(), t.cols());
                    all_x.insert(all_x.end(), x.begin(), x.end());
                    all_y.insert(all_y.end(), y.begin(), y.end());
                }
                const double err = relative_rms(all_y, all_x);
                switch (t.type) {
                    case GGMLType::F32: CHECK(err == 0.0); break;
                    case GGMLType::F16: CHECK(err < 1e-3); break;
                    case GGMLType::BF16: CHECK(err < 5e-3); break;
                    case GGMLType::Q8_0: CHECK(err < 0.01); break;
                    case GGMLType::Q6_K: CHECK(err < 0.03); break;
                    case GGMLType::Q5_0: CHECK(err < 0.06); break;
                    case GGMLType::Q4_K: CHECK(err < 0.1); break;
                    default: FAIL("unexpected type " << ggml_type_name(t.type));
                }
            }
        }
    }
}

TEST_CASE("synth vocabulary: exact size, unique pieces, llama layout, and the tokenizer round-trips") {
    for (int32_t size : {300, 1024, 32000, 128256, 151936}) {
        CAPTURE(size);
        const SynthVocab v = synth_vocab(size);
        REQUIRE(v.tokens.size() == size_t(size));
        REQUIRE(v.scores.size() == size_t(size));
        REQUIRE(v.types.size() == size_t(size));
        CHECK(std::set<std::string>(v.tokens.begin(), v.tokens.end()).size() == size_t(size));
        CHECK(v.tokens[0] == "<unk>");
        CHECK(v.types[0] == 2);
        CHECK((v.tokens[1] == "<s>" && v.tokens[2] == "</s>" && v.types[1] == 3 && v.types[2] == 3));
        CHECK((v.tokens[3] == "<0x00>" && v.tokens[13] == "<0x0A>" && v.tokens[258] == "<0xFF>"));
        for (int i = 3; i < 259; ++i) CHECK(v.types[i] == 6);
        for (int i = 259; i < size; ++i) {
            CHECK(v.types[i] == 1);
            if (i > 259) CHECK(v.scores[i] < v.scores[i - 1]);
        }
    }

    for (const char* spec : {"tiny", "l134m", "qwen2-0.5b"}) {
        CAPTURE(spec);
        const GGUFFile f = open_model_source("", spec, /*weights=*/false);
        const auto tok = Tokenizer::from_gguf(f);
        const std::vector<int32_t> ids = tok->encode("Hello world", true);
        REQUIRE(ids.size() == 3);
        CHECK(ids[0] == 1);
        CHECK(tok->piece(ids[1]) == "\xE2\x96\x81Hello");
        CHECK(tok->piece(ids[2]) == "\xE2\x96\x81world");
        for (const std::string s : {"Hello world", "The little dog ran home. Then, she said: \"hi!\"",
                                    "  two  spaces\nand a newline\ttab", "numbers 12345 and symbols #$%^&*",
                                    "caf\xC3\xA9 na\xC3\xAFve \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xF0\x9F\x99\x82",
                                    "bahiwabu calakonako"}) {
            CAPTURE(s);
            const std::vector<int32_t> e = tok->encode(s, false);
            CHECK(tok->decode(e) == s);
            for (int32_t id : e) CHECK((id >= 0 && id < tok->vocab_size()));
        }
    }
    // Large vocabularies hold whole words: one token each.
    const auto tok = Tokenizer::from_gguf(open_model_source("", "l134m", false));
    CHECK(tok->encode("The little dog ran home", false).size() == 5);
}

TEST_CASE("GGUFWriter streaming: header_bytes plus streamed tensors equal to_bytes") {
    GGUFWriter whole, streamed;
    const std::vector<float> a = {1, 2, 3}, b(64, 0.5f);
    for (GGUFWriter* w : {&whole, &streamed}) {
        w->set_string("general.architecture", "llama");
        w->set_u32("x", 7);
    }
    auto bytes = [](const std::vector<float>& v) {
        std::vector<uint8_t> out(v.size() * 4);
        std::memcpy(out.data(), v.data(), out.size());
        return out;
    };
    whole.add_tensor("a", GGMLType::F32, {3}, bytes(a));
    whole.add_tensor("b", GGMLType::F32, {32, 2}, bytes(b));
    streamed.add_tensor_info("a", GGMLType::F32, {3});
    streamed.add_tensor_info("b", GGMLType::F32, {32, 2});
    CHECK_THROWS_AS(streamed.add_tensor_info("b", GGMLType::F32, {4}), GGUFError);    // duplicate name
    CHECK_THROWS_AS(streamed.add_tensor_info("c", GGMLType::Q8_0, {16}), GGUFError);  // not whole blocks
    CHECK_THROWS_WITH(streamed.to_bytes(), doctest::Contains("add_tensor_info"));

    std::vector<uint8_t> image = streamed.header_bytes();
    CHECK(image.size() % streamed.alignment() == 0);
    for (const auto& v : {a, b}) {
        const auto d = bytes(v);
        image.insert(image.end(), d.begin(), d.end());
        image.resize((image.size() + 31) / 32 * 32, 0);
    }
    CHECK(image == whole.to_bytes());
    CHECK(whole.header_bytes() == streamed.header_bytes());
}

TEST_CASE("GGUFFile::from_bytes keeps its image alive") {
    GGUFWriter w;
    w.set_string("general.architecture", "llama");
    const std::vector<uint8_t> data = {1, 2, 3, 4, 5, 6, 7, 8};
    w.add_tensor("t", GGMLType::I8, {8}, data);
    GGUFFile moved = [&] {
        GGUFFile f = GGUFFile::from_bytes(w.to_bytes(), "image");
        GGUFFile g = std::move(f);
        return g;
    }();
    GGUFFile assigned = GGUFFile::from_bytes(w.to_bytes());
    assigned = std::move(moved);
    CHECK(assigned.path() == "image");
    CHECK(std::memcmp(assigned.tensor("t").data, data.data(), 8) == 0);
    CHECK_THROWS_AS(GGUFFile::from_bytes({1, 2, 3}), GGUFError);
}
