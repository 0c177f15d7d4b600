// The whole forward pass of a small random llama, written to a real GGUF file,
// against a dense transformer computed here in double precision.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <vector>

#include "../rel_error.h"
#include "kernels/formats/float16.h"
#include "engine/core/generate.h"
#include "engine/core/plan_builder.h"
#include "engine/gguf/gguf.h"
#include "engine/model/model.h"
#include "engine/model/model_runner.h"

using namespace minfer;

namespace {

struct TinyLlama {
    int dim = 24, layers = 2, heads = 6, kv_heads = 2, ffn = 40, vocab = 50, ctx = 64;
    int hd() const { return dim / heads; }
    float eps = 1e-5f, rope_base = 10000.0f;
    bool tied = false, rope_freqs = false;
    GGMLType type = GGMLType::F32;
    std::map<std::string, std::vector<float>> w;  // the float values the file holds

    void make(uint32_t seed) {
        std::mt19937 rng(seed);
        std::normal_distribution<float> d(0.0f, 0.3f);
        auto rnd = [&](size_t n, float base = 0.0f) {
            std::vector<float> v(n);
            for (auto& x : v) x = base + d(rng);
            return v;
        };
        w["token_embd.weight"] = rnd(size_t(vocab) * dim);
        if (!tied) w["output.weight"] = rnd(size_t(vocab) * dim);
        w["output_norm.weight"] = rnd(dim, 1.0f);
        if (rope_freqs) w["rope_freqs.weight"] = {1.0f, 3.0f};  // hd/2 = 2 factors
        for (int l = 0; l < layers; ++l) {
            const std::string b = "blk." + std::to_string(l) + ".";
            w[b + "attn_norm.weight"] = rnd(dim, 1.0f);
            w[b + "attn_q.weight"] = rnd(size_t(dim) * dim);
            w[b + "attn_k.weight"] = rnd(size_t(kv_heads) * hd() * dim);
            w[b + "attn_v.weight"] = rnd(size_t(kv_heads) * hd() * dim);
            w[b + "attn_output.weight"] = rnd(size_t(dim) * dim);
            w[b + "ffn_norm.weight"] = rnd(dim, 1.0f);
            w[b + "ffn_gate.weight"] = rnd(size_t(ffn) * dim);
            w[b + "ffn_up.weight"] = rnd(size_t(ffn) * dim);
            w[b + "ffn_down.weight"] = rnd(size_t(dim) * ffn);
        }
        // Matrices stored as F16/BF16 hold rounded values: keep those as the truth.
        for (auto& [name, v] : w)
            if (is_matrix(name))
                for (auto& x : v)
                    x = type == GGMLType::F16 ? fp16_to_f32(f32_to_fp16(x))
                        : type == GGMLType::BF16 ? bf16_to_f32(f32_to_bf16(x)) : x;
    }
    static bool is_matrix(const std::string& name) { return name.find("norm") == std::string::npos && name.find("rope") == std::string::npos; }

    std::vector<int64_t> shape(const std::string& name) const {
        const int64_t n = int64_t(w.at(name).size());
        if (!is_matrix(name)) return {n};
        const int64_t cols = name.find("ffn_down") != std::string::npos ? ffn : dim;
        return {cols, n / cols};
    }

    void write(const std::string& path) const {
        GGUFWriter g;
        g.set_string("general.architecture", "llama");
        g.set_u32("llama.context_length", ctx);
        g.set_u32("llama.embedding_length", dim);
        g.set_u32("llama.block_count", layers);
        g.set_u32("llama.feed_forward_length", ffn);
        g.set_u32("llama.attention.head_count", heads);
        g.set_u32("llama.attention.head_count_kv", kv_heads);
        g.set_f32("llama.attention.layer_norm_rms_epsilon", eps);
        g.set_f32("llama.rope.freq_base", rope_base);
        for (const auto& [name, v] : w) {
            std::vector<uint8_t> bytes;
            const GGMLType t = is_matrix(name) ? type : GGMLType::F32;
            if (t == GGMLType::F32) {
                bytes.resize(v.size() * 4);
                std::memcpy(bytes.data(), v.data(), bytes.size());
            } else {
                bytes.resize(v.size() * 2);
                for (size_t i = 0; i < v.size(); ++i) {
                    const uint16_t h = t == GGMLType::F16 ? f32_to_fp16(v[i]) : f32_to_bf16(v[i]);
                    std::memcpy(bytes.data() + 2 * i, &h, 2);
                }
            }
            g.add_tensor(name, t, shape(name), std::move(bytes));
        }
        g.write(path);
    }

    // Dense causal transformer in double precision: logits of every position.
    std::vector<std::vector<double>> reference_logits(const std::vector<int32_t>& tokens) const {
        const int T = int(tokens.size()), H = hd(), kvd = kv_heads * H;
        using Mat = std::vector<std::vector<double>>;
        auto matvec = [&](const std::string& name, const std::vector<double>& x) {
            const auto& m = w.at(name);
            const size_t out = m.size() / x.size();
            std::vector<double> y(out, 0.0);
            for (size_t o = 0; o < out; ++o)
                for (size_t j = 0; j < x.size(); ++j) y[o] += m[o * x.size() + j] * x[j];
            return y;
        };
        auto norm = [&](const std::vector<double>& x, const std::string& name) {
            double ss = 0;
            for (double v : x) ss += v * v;
            const double inv = 1.0 / std::sqrt(ss / x.size() + eps);
            std::vector<double> y(x.size());
            for (size_t j = 0; j < x.size(); ++j) y[j] = x[j] * inv * w.at(name)[j];
            return y;
        };
        auto rope = [&](std::vector<double>& v, int nheads, int pos) {
            for (int h = 0; h < nheads; ++h)
                for (int i = 0; i < H / 2; ++i) {
                    double theta = pos * std::pow(double(rope_base), -2.0 * i / H);
                    if (rope_freqs) theta /= w.at("rope_freqs.weight")[i];
                    double& a = v[h * H + 2 * i];
                    double& b = v[h * H + 2 * i + 1];
                    const double a0 = a, b0 = b;
                    a = a0 * std::cos(theta) - b0 * std::sin(theta);
                    b = a0 * std::sin(theta) + b0 * std::cos(theta);
                }
        };
        Mat x(T);
        for (int t = 0; t < T; ++t) {
            const auto& e = w.at("token_embd.weight");
            x[t].assign(e.begin() + size_t(tokens[t]) * dim, e.begin() + size_t(tokens[t] + 1) * dim);
        }
        for (int l = 0; l < layers; ++l) {
            const std::string b = "blk." + std::to_string(l) + ".";
            Mat q(T), k(T), v(T);
            for (int t = 0; t < T; ++t) {
                const auto h = norm(x[t], b + "attn_norm.weight");
                q[t] = matvec(b + "attn_q.weight", h);
                k[t] = matvec(b + "attn_k.weight", h);
                v[t] = matvec(b + "attn_v.weight", h);
                rope(q[t], heads, t);
                rope(k[t], kv_heads, t);
            }
            for (int t = 0; t < T; ++t) {
                std::vector<double> att(size_t(dim), 0.0);
                for (int h = 0; h < heads; ++h) {
                    const int g = h / (heads / kv_heads);
                    std::vector<double> s(t + 1);
                    double mx = -1e300, total = 0;
                    for (int u = 0; u <= t; ++u) {
                        double d = 0;
                        for (int j = 0; j < H; ++j) d += q[t][h * H + j] * k[u][g * H + j];
                        s[u] = d / std::sqrt(double(H));
                        mx = std::max(mx, s[u]);
                    }
                    for (auto& e : s) total += (e = std::exp(e - mx));
                    for (int u = 0; u <= t; ++u)
                        for (int j = 0; j < H; ++j) att[h * H + j] += s[u] / total * v[u][g * H + j];
                }
                const auto o = matvec(b + "attn_output.weight", att);
                for (int j = 0; j < dim; ++j) x[t][j] += o[j];
                const auto h = norm(x[t], b + "ffn_norm.weight");
                auto gate = matvec(b + "ffn_gate.weight", h);
                const auto up = matvec(b + "ffn_up.weight", h);
                for (int j = 0; j < ffn; ++j) gate[j] = gate[j] / (1 + std::exp(-gate[j])) * up[j];
                const auto down = matvec(b + "ffn_down.weight", gate);
                for (int j = 0; j < dim; ++j) x[t][j] += down[j];
            }
            (void)kvd;
        }
        Mat logits(T);
        for (int t = 0; t < T; ++t)
            logits[t] = matvec(tied ? "token_embd.weight" : "output.weight", norm(x[t], "output_norm.weight"));
        return logits;
    }
};

// Runs `tokens` through the model in chunks of `chunk` rows, keeping the logits of every row.
std::vector<std::vector<float>> run_model(const std::string& path, const std::vector<int32_t>& tokens, int32_t chunk,
                                          int32_t block_size) {
    auto backend = make_cpu_backend();
    auto model = Model::load(path, *backend);
    const int32_t blocks = 64 / block_size + 1;
    BlockManager manager(blocks, block_size, false);
    SequenceState seq;
    seq.tokens = tokens;
    std::vector<BlockCopy> copies;
    PlanBuilder planner(block_size);
    ModelRunner runner(*model, {chunk, chunk, blocks, block_size});
    std::vector<std::vector<float>> out;
    const int32_t vocab = model->config().vocab_size;
    for (int32_t start = 0; start < int32_t(tokens.size()); start += chunk) {
        const int32_t count = std::min<int32_t>(chunk, int32_t(tokens.size()) - start);
        REQUIRE(manager.allocate(seq.blocks, start, start + count, copies));
        seq.num_computed = start;
        planner.add_rows(seq, count);
        for (int32_t r = 0; r < count; ++r) planner.add_logits_row(r);
        runner.forward(planner.finish());
        const auto l = runner.logits();
        for (int32_t r = 0; r < count; ++r) out.emplace_back(l.begin() + size_t(r) * vocab, l.begin() + size_t(r + 1) * vocab);
    }
    return out;
}

}  // namespace

TEST_CASE("a random llama's logits equal a dense double-precision transformer") {
    const std::string path = (std::filesystem::temp_directory_path() / "minfer_tiny_llama.gguf").string();
    const std::vector<int32_t> tokens = {1, 7, 33, 2, 49, 0, 12, 12, 5, 30, 41, 8, 19};
    struct Variant {
        GGMLType type;
        bool tied, rope_freqs;
        int32_t chunk, block_size;
    };
    for (const Variant& v : {Variant{GGMLType::F32, false, false, 13, 16}, Variant{GGMLType::F32, true, true, 4, 3},
                             Variant{GGMLType::F16, false, false, 5, 1}, Variant{GGMLType::BF16, true, false, 1, 4}}) {
        CAPTURE(ggml_type_name(v.type));
        CAPTURE(v.chunk);
        TinyLlama m;
        m.type = v.type;
        m.tied = v.tied;
        m.rope_freqs = v.rope_freqs;
        m.make(11);
        m.write(path);
        const auto ref = m.reference_logits(tokens);
        const auto got = run_model(path, tokens, v.chunk, v.block_size);
        REQUIRE(got.size() == tokens.size());
        CHECK(minfer::test::rel_error_rows(got, ref) < 1e-5);
    }
    std::filesystem::remove(path);
}

TEST_CASE("a model with a wrong tensor shape or an unsupported architecture is refused at load") {
    const std::string path = (std::filesystem::temp_directory_path() / "minfer_bad_llama.gguf").string();
    TinyLlama m;
    m.make(1);
    m.w["blk.1.ffn_up.weight"].resize(size_t(m.ffn - 1) * m.dim);
    m.write(path);
    auto backend = make_cpu_backend();
    CHECK_THROWS_WITH(Model::load(path, *backend), doctest::Contains("blk.1.ffn_up.weight"));

    GGUFWriter g;
    g.set_string("general.architecture", "mamba");
    g.write(path);
    CHECK_THROWS_WITH(Model::load(path, *backend), doctest::Contains("architecture 'mamba' is not supported"));
    std::filesystem::remove(path);
}
