// Small synthetic llama3/qwen2/qwen3/gemma3 models run against a double-precision
// transformer, every dtype loaded and generating, and quantized ones close to f32.
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

// The logits of every position, computed here in double precision from the
// f32 weights of `f`: RMSNorm, GQA attention with NORM or NEOX rope (with
// rope_freqs divisors) and q/k/v biases, SwiGLU; for gemma3 (as Hugging Face's
// Gemma3 model computes it): embeddings * sqrt(dim), q/k RMSNorm per head, norms
// after attention and FFN, GeGLU (tanh), and every layer but each sixth sliding
// over `sliding_window` tokens with rope base 10,000.
std::vector<std::vector<double>> reference_logits(const SynthPreset& p, const GGUFFile& f,
                                                  const std::vector<int32_t>& tokens) {
    using Vec = std::vector<double>;
    auto w = [&](const std::string& name) {
        const GGUFTensorInfo& t = f.tensor(name);
        REQUIRE(t.type == GGMLType::F32);
        std::vector<float> v(static_cast<size_t>(t.n_elements()));
        std::memcpy(v.data(), t.data, v.size() * 4);
        return Vec(v.begin(), v.end());
    };
    auto matvec = [&](const std::string& name, const Vec& x) {
        const Vec m = w(name);
        Vec y(m.size() / x.size(), 0.0);
        for (size_t o = 0; o < y.size(); ++o)
            for (size_t j = 0; j < x.size(); ++j) y[o] += m[o * x.size() + j] * x[j];
        return y;
    };
    auto add = [](Vec& y, const Vec& b) {
        for (size_t i = 0; i < y.size(); ++i) y[i] += b[i];
    };
    auto norm = [&](const Vec& x, const std::string& name) {
        double ss = 0;
        for (double v : x) ss += v * v;
        const double inv = 1.0 / std::sqrt(ss / x.size() + p.norm_eps);
        const Vec g = w(name);
        Vec y(x.size());
        for (size_t j = 0; j < x.size(); ++j) y[j] = x[j] * inv * g[j];
        return y;
    };
    const int H = p.head_dim(), T = static_cast<int>(tokens.size());
    const bool gemma = p.is_gemma3();
    const bool neox = std::string(p.arch) != "llama";
    const std::vector<float> freqs = synth_rope_freqs(p);
    auto rope = [&](Vec& v, int heads, int pos, double base) {
        for (int h = 0; h < heads; ++h)
            for (int i = 0; i < H / 2; ++i) {
                double theta = pos * std::pow(base, -2.0 * i / H);
                if (!freqs.empty()) theta /= freqs[i];
                double& a = v[h * H + (neox ? i : 2 * i)];
                double& b = v[h * H + (neox ? i + H / 2 : 2 * i + 1)];
                const double a0 = a, b0 = b;
                a = a0 * std::cos(theta) - b0 * std::sin(theta);
                b = a0 * std::sin(theta) + b0 * std::cos(theta);
            }
    };

    const Vec embd = w("token_embd.weight");
    std::vector<Vec> x(T);
    for (int t = 0; t < T; ++t) x[t].assign(embd.begin() + tokens[t] * p.dim, embd.begin() + (tokens[t] + 1) * p.dim);
    if (gemma)
        for (Vec& row : x)
            for (double& e : row) e *= std::sqrt(double(p.dim));
    // Each head of v normalised by weight `name` (gemma3's q/k norms).
    auto head_norm = [&](Vec& v, int heads, const std::string& name) {
        for (int h = 0; h < heads; ++h) {
            const Vec part(v.begin() + h * H, v.begin() + (h + 1) * H);
            const Vec normed = norm(part, name);
            std::copy(normed.begin(), normed.end(), v.begin() + h * H);
        }
    };
    for (int l = 0; l < p.n_layers; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        const bool sliding = gemma && p.sliding_window > 0 && (l + 1) % 6 != 0;
        const double base = sliding ? 10000.0 : double(p.rope_base);
        std::vector<Vec> q(T), k(T), v(T);
        for (int t = 0; t < T; ++t) {
            const Vec h = norm(x[t], b + "attn_norm.weight");
            q[t] = matvec(b + "attn_q.weight", h);
            k[t] = matvec(b + "attn_k.weight", h);
            v[t] = matvec(b + "attn_v.weight", h);
            if (p.qkv_bias) {
                add(q[t], w(b + "attn_q.bias"));
                add(k[t], w(b + "attn_k.bias"));
                add(v[t], w(b + "attn_v.bias"));
            }
            if (p.has_qk_norm()) {
                head_norm(q[t], p.n_heads, b + "attn_q_norm.weight");
                head_norm(k[t], p.n_kv_heads, b + "attn_k_norm.weight");
            }
            rope(q[t], p.n_heads, t, base);
            rope(k[t], p.n_kv_heads, t, base);
        }
        for (int t = 0; t < T; ++t) {
            Vec att(size_t(p.n_heads) * H, 0.0);
            for (int h = 0; h < p.n_heads; ++h) {
                const int g = h / (p.n_heads / p.n_kv_heads);
                const int first = sliding ? std::max(0, t - p.sliding_window + 1) : 0;
                Vec s(t + 1, 0.0);
                double mx = -1e300, total = 0;
                for (int u = first; u <= t; ++u) {
                    double d = 0;
                    for (int j = 0; j < H; ++j) d += q[t][h * H + j] * k[u][g * H + j];
                    mx = std::max(mx, s[u] = d / std::sqrt(double(H)));
                }
                for (int u = first; u <= t; ++u) total += (s[u] = std::exp(s[u] - mx));
                for (int u = first; u <= t; ++u)
                    for (int j = 0; j < H; ++j) att[h * H + j] += s[u] / total * v[u][g * H + j];
            }
            Vec o = matvec(b + "attn_output.weight", att);
            if (gemma) o = norm(o, b + "post_attention_norm.weight");
            add(x[t], o);
            const Vec h = norm(x[t], b + "ffn_norm.weight");
            Vec gate = matvec(b + "ffn_gate.weight", h);
            const Vec up = matvec(b + "ffn_up.weight", h);
            for (size_t j = 0; j < gate.size(); ++j) {
                const double g = gate[j];
                const double act = gemma ? 0.5 * g * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (g + 0.044715 * g * g * g)))
                                         : g / (1 + std::exp(-g));
                gate[j] = act * up[j];
            }
            Vec down = matvec(b + "ffn_down.weight", gate);
            if (gemma) down = norm(down, b + "post_ffw_norm.weight");
            add(x[t], down);
        }
    }
    std::vector<Vec> logits(T);
    for (int t = 0; t < T; ++t)
        logits[t] = matvec(p.tied ? "token_embd.weight" : "output.weight", norm(x[t], "output_norm.weight"));
    return logits;
}

}  // namespace

TEST_CASE("small synthetic llama3, qwen2, qwen3 and gemma3 models run and match a double-precision transformer") {
    const std::vector<int32_t> tokens = {1, 300 - 7, 42, 259, 17, 2, 100, 100, 5};
    for (const SynthPreset* p : {&kSmallLlama3, &kSmallQwen2, &kSmallQwen3, &kSmallGemma3}) {
        CAPTURE(p->name);
        GGUFFile f = GGUFFile::from_bytes(synth_image(*p, SynthDType::F32, {.seed = 9}), p->name);
        const auto ref = reference_logits(*p, f, tokens);
        auto backend = make_cpu_backend();
        const auto model = Model::load(std::move(f), *backend);
        CHECK(model->config().rope_neox == (std::string(p->arch) != "llama"));
        CHECK(model->config().sliding_window == p->sliding_window);
        CHECK(model->config().qkv_bias == p->qkv_bias);
        CHECK(model->config().has_rope_freqs == (p->rope_factor > 0));
        CHECK(model->config().tied_output == p->tied);
        const auto got = prefill_logits(*model, tokens);
        CHECK(minfer::test::rel_error_rows(got, ref) < 1e-5);
        // Random weights, sane activations: logits of order 1, not tiny, not huge.
        double squares = 0;
        for (const auto& row : ref)
            for (double x : row) squares += x * x;
        const double rms = std::sqrt(squares / (tokens.size() * ref[0].size()));
        CHECK((rms > 0.1 && rms < 10));
    }
}

TEST_CASE("synthetic models of every dtype load and generate, from memory as from the file") {
    const std::string path = temp_path("minfer_synth_run.gguf");
    for (SynthDType d : {SynthDType::F32, SynthDType::F16, SynthDType::BF16, SynthDType::Q8_0, SynthDType::Q4_K_M}) {
        CAPTURE(synth_dtype_name(d));
        synth_write_file(preset("tiny"), d, path);
        auto backend = make_cpu_backend();
        const auto from_file = Model::load(path, *backend);
        const auto in_memory = Model::load(open_model_source("", std::string("tiny:") + synth_dtype_name(d)), *backend);
        const std::vector<int32_t> tokens = {1, 363, 368, 323};
        const auto a = prefill_logits(*from_file, tokens), b = prefill_logits(*in_memory, tokens);
        CHECK(a == b);
        for (const auto& row : a)
            for (float v : row) REQUIRE(std::isfinite(v));
    }
    std::filesystem::remove(path);
}

TEST_CASE("quantized synthetic models stay close to their f32 original (relative error of the logits)") {
    // The same weights in every dtype (the quantized files are quantizations of
    // the f32 one), so the logits differ only by the storage precision and the
    // quantized-domain dot products. Printed so the figures can be quoted.
    struct Bound {
        SynthDType dtype;
        double max_rel;
    };
    // A random-weight network amplifies a weight perturbation about 4x on its
    // way to the logits (f16: 3e-4 per weight -> ~1e-3; bf16: 2e-3 -> ~9e-3).
    // Q8_0 adds ~0.5% per weight and ~0.5% for the 8-bit activations; Q4_K
    // rounds to 16 levels per 32 values, ~8% of a Gaussian weight's spread.
    const Bound bounds[] = {{SynthDType::F16, 3e-3},
                            {SynthDType::BF16, 2e-2},
                            {SynthDType::Q8_0, 5e-2},
                            {SynthDType::Q4_K_M, 0.6}};
    const std::vector<int32_t> tokens = {1, 363, 368, 323, 100, 42, 7, 250};
    for (const char* name : {"tiny", "l134m"}) {
        auto backend = make_cpu_backend();
        const auto f32 = prefill_logits(*Model::load(open_model_source("", std::string(name) + ":f32"), *backend), tokens);
        for (const Bound& b : bounds) {
            const auto got = prefill_logits(
                *Model::load(open_model_source("", std::string(name) + ":" + synth_dtype_name(b.dtype)), *backend),
                tokens);
            double worst = 0;
            for (size_t t = 0; t < tokens.size(); ++t) worst = std::max(worst, relative_rms(got[t], f32[t]));
            MESSAGE(fmt::format("{} {}: logits relative error vs f32 {:.2e} (worst position)", name,
                                synth_dtype_name(b.dtype), worst));
            CHECK(worst < b.max_rel);
            CHECK(worst > 0);  // a different dtype that changes nothing would mean it was not applied
        }
    }
}
