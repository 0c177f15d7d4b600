// Mixture-of-experts models: the CPU ops against a naive double-precision
// reference on random data (every weight format), the tiny presets against
// Hugging Face transformers in float64 (references made offline by
// tests/oracles/moe_hf.py, in tests/unit/data/moe_oracle/), every dtype
// loading, the engine's batching on a MoE model, and bad files refused.
// (tests/oracles/mixtral_hf.py builds transformers' Mixtral from the file's weights.)
#include "engine_test_fixture.h"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <sstream>

#include "engine/core/plan_builder.h"
#include "engine/gguf/gguf.h"
#include "engine/gguf/synth.h"
#include "kernels/cpu/moe.h"
#include "kernels/formats/quant.h"
#include "kvcache/block_manager.h"
#include "synth_test_util.h"

using namespace minfer;
using namespace minfer::synth_test;

namespace {

std::vector<float> random_floats(std::mt19937& rng, size_t n, float sigma = 1.0f) {
    std::normal_distribution<float> nd(0.0f, sigma);
    std::vector<float> v(n);
    for (float& x : v) x = nd(rng);
    return v;
}

// n_experts matrices of rows x cols in `type`, one after another (a 3-D GGUF tensor's bytes).
struct ExpertTensor {
    GGMLType type;
    int64_t rows, cols;
    int32_t n;
    std::vector<uint8_t> bytes;
    std::vector<double> widened;  // what the bytes hold, per expert row-major
    ExpertTensor(std::mt19937& rng, GGMLType t, int32_t n_experts, int64_t r, int64_t c)
        : type(t), rows(r), cols(c), n(n_experts) {
        const size_t row_bytes = ggml_row_bytes(t, c);
        bytes.resize(row_bytes * size_t(r * n_experts));
        std::vector<float> f = random_floats(rng, size_t(r * c * n_experts), 1.0f / std::sqrt(float(c)));
        std::vector<float> back(static_cast<size_t>(c));
        for (int64_t i = 0; i < r * n_experts; ++i) {
            quantize_row(t, f.data() + i * c, bytes.data() + size_t(i) * row_bytes, c);
            dequantize_row(t, bytes.data() + size_t(i) * row_bytes, back.data(), c);
            widened.insert(widened.end(), back.begin(), back.end());
        }
    }
    WeightView view(const char* name) const { return {name, type, rows * n, cols, bytes.data()}; }
    // y = W_e x in double.
    std::vector<double> apply(int32_t e, const std::vector<double>& x) const {
        std::vector<double> y(size_t(rows), 0.0);
        const double* w = widened.data() + size_t(e) * size_t(rows * cols);
        for (int64_t o = 0; o < rows; ++o)
            for (int64_t i = 0; i < cols; ++i) y[size_t(o)] += w[o * cols + i] * x[size_t(i)];
        return y;
    }
};

}  // namespace

TEST_CASE("moe: routing takes the k most probable experts, renormalised or not") {
    const float logits[] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};  // a tie between experts 1 and 3
    int32_t ids[3];
    float w[3];
    cpu::moe_route(logits, 1, 5, 3, false, ids, w);
    CHECK(ids[0] == 1);
    CHECK(ids[1] == 3);  // the tie: the lower id first
    CHECK(ids[2] == 4);
    double z = 0;
    for (float l : logits) z += std::exp(double(l));
    CHECK(w[0] == doctest::Approx(std::exp(2.0) / z).epsilon(1e-6));
    CHECK(w[2] == doctest::Approx(std::exp(1.0) / z).epsilon(1e-6));
    cpu::moe_route(logits, 1, 5, 3, true, ids, w);
    CHECK(w[0] + w[1] + w[2] == doctest::Approx(1.0).epsilon(1e-6));
    CHECK(w[2] == doctest::Approx(std::exp(1.0) / (2 * std::exp(2.0) + std::exp(1.0))).epsilon(1e-6));
    CHECK_THROWS_AS(cpu::moe_route(logits, 1, 5, 6, true, ids, w), std::invalid_argument);
}

TEST_CASE("moe: the experts' weighted sum equals a double-precision reference, every weight format") {
    std::mt19937 rng(11);
    auto backend = make_cpu_backend(3);
    struct Case {
        GGMLType type;
        double tol;  // quantized weights meet int8-quantized activations, three matmuls deep
    };
    const Case cases[] = {{GGMLType::F32, 1e-5}, {GGMLType::F16, 1e-5}, {GGMLType::BF16, 1e-5},
                          {GGMLType::Q8_0, 4e-2}, {GGMLType::Q4_0, 4e-2}, {GGMLType::Q4_1, 4e-2},
                          {GGMLType::Q5_0, 4e-2}, {GGMLType::Q5_1, 4e-2}, {GGMLType::Q4_K, 4e-2},
                          {GGMLType::Q5_K, 4e-2}, {GGMLType::Q6_K, 4e-2}};
    const int32_t E = 6, k = 2, dim = 256, ffn = 256, rows = 13;
    for (const Case& c : cases) {
        CAPTURE(ggml_type_name(c.type));
        const ExpertTensor gate(rng, c.type, E, ffn, dim), up(rng, c.type, E, ffn, dim), down(rng, c.type, E, dim, ffn);
        const auto g = backend->pack_experts(gate.view("gate"), E), u = backend->pack_experts(up.view("up"), E),
                   d = backend->pack_experts(down.view("down"), E);
        CHECK(g->rows == ffn);
        CHECK(d->cols == ffn);
        const std::vector<float> x = random_floats(rng, size_t(rows * dim));
        const std::vector<float> logits = random_floats(rng, size_t(rows * E));
        std::vector<int32_t> ids(size_t(rows * k));
        std::vector<float> w(static_cast<size_t>(rows * k));
        backend->moe_route(logits.data(), rows, {E, k, true}, ids.data(), w.data());
        std::vector<float> out(size_t(rows * dim), NAN);
        backend->moe_experts(x.data(), ids.data(), w.data(), rows, k, *g, *u, *d, out.data());
        double err = 0, norm = 0;
        for (int32_t r = 0; r < rows; ++r) {
            const std::vector<double> xr(x.begin() + r * dim, x.begin() + (r + 1) * dim);
            std::vector<double> want(size_t(dim), 0.0);
            for (int32_t j = 0; j < k; ++j) {
                const int32_t e = ids[size_t(r * k + j)];
                const auto a = gate.apply(e, xr), b = up.apply(e, xr);
                std::vector<double> h(static_cast<size_t>(ffn));
                for (size_t i = 0; i < h.size(); ++i) h[i] = a[i] / (1 + std::exp(-a[i])) * b[i];
                const auto y = down.apply(e, h);
                for (int32_t i = 0; i < dim; ++i) want[size_t(i)] += w[size_t(r * k + j)] * y[size_t(i)];
            }
            for (int32_t i = 0; i < dim; ++i) {
                err += std::pow(out[size_t(r * dim + i)] - want[size_t(i)], 2);
                norm += want[size_t(i)] * want[size_t(i)];
            }
        }
        CHECK(std::sqrt(err / norm) < c.tol);

        // Batch invariance: each row alone gives the very bits it gave in the batch.
        for (int32_t r : {0, 7, rows - 1}) {
            std::vector<float> alone(static_cast<size_t>(dim));
            backend->moe_experts(x.data() + r * dim, ids.data() + r * k, w.data() + r * k, 1, k, *g, *u, *d,
                                 alone.data());
            CHECK(std::memcmp(alone.data(), out.data() + r * dim, size_t(dim) * sizeof(float)) == 0);
        }
    }
}

TEST_CASE("moe: a slice of the experts (expert parallelism) adds only its own pairs, and the slices sum to the whole") {
    std::mt19937 rng(5);
    auto backend = make_cpu_backend(2);
    const int32_t E = 6, k = 2, dim = 64, ffn = 96, rows = 40;
    for (const GGMLType type : {GGMLType::F32, GGMLType::Q8_0}) {
        CAPTURE(ggml_type_name(type));
        const ExpertTensor gate(rng, type, E, ffn, dim), up(rng, type, E, ffn, dim), down(rng, type, E, dim, ffn);
        const std::vector<float> x = random_floats(rng, size_t(rows * dim));
        const std::vector<float> logits = random_floats(rng, size_t(rows * E));
        std::vector<int32_t> ids(size_t(rows * k));
        std::vector<float> w(static_cast<size_t>(rows * k));
        backend->moe_route(logits.data(), rows, {E, k, true}, ids.data(), w.data());
        const auto g = backend->pack_experts(gate.view("gate"), E), u = backend->pack_experts(up.view("up"), E),
                   d = backend->pack_experts(down.view("down"), E);
        std::vector<float> whole(size_t(rows * dim));
        backend->moe_experts(x.data(), ids.data(), w.data(), rows, k, *g, *u, *d, whole.data());
        for (const int32_t slices : {2, 3}) {
            CAPTURE(slices);
            const int32_t local = E / slices;
            std::vector<double> sum(whole.size(), 0.0);
            for (int32_t s = 0; s < slices; ++s) {
                const int32_t first = s * local;
                auto slice = [&](const ExpertTensor& t, const char* name) {
                    const size_t expert_bytes = t.bytes.size() / size_t(E);
                    auto p = backend->pack_experts(
                        {name, t.type, t.rows * local, t.cols, t.bytes.data() + size_t(first) * expert_bytes}, local);
                    p->first_expert = first;
                    return p;
                };
                const auto gs = slice(gate, "gate"), us = slice(up, "up"), ds = slice(down, "down");
                std::vector<float> part(whole.size(), NAN);
                backend->moe_experts(x.data(), ids.data(), w.data(), rows, k, *gs, *us, *ds, part.data());
                for (size_t i = 0; i < part.size(); ++i) sum[i] += part[i];
                for (int32_t r = 0; r < rows; ++r) {
                    int32_t mine = 0;
                    for (int32_t j = 0; j < k; ++j) mine += ids[size_t(r * k + j)] / local == s;
                    const float* got = part.data() + size_t(r) * dim;
                    if (mine == k)  // every pair here: the very bits of the whole
                        CHECK(std::memcmp(got, whole.data() + size_t(r) * dim, size_t(dim) * sizeof(float)) == 0);
                    if (mine == 0) CHECK(std::all_of(got, got + dim, [](float v) { return v == 0.0f; }));
                }
            }
            double err = 0, norm = 0;
            for (size_t i = 0; i < whole.size(); ++i) {
                err += std::pow(sum[i] - whole[i], 2);
                norm += double(whole[i]) * whole[i];
            }
            CHECK(std::sqrt(err / norm) < 1e-6);
        }
    }
}

namespace {

std::vector<double> log_softmax(const std::vector<float>& l) {
    const double max = *std::max_element(l.begin(), l.end());
    double z = 0;
    for (float v : l) z += std::exp(v - max);
    std::vector<double> out;
    for (float v : l) out.push_back(v - max - std::log(z));
    return out;
}

template <class T>
std::vector<T> json_array(const boost::json::value& v) {
    std::vector<T> out;
    for (const auto& x : v.as_array()) out.push_back(boost::json::value_to<T>(x));
    return out;
}

}  // namespace

TEST_CASE("moe: the tiny qwen3moe, qwen2moe and Mixtral presets match transformers in float64") {
    // Mixtral's reference is transformers' MixtralForCausalLM built from the
    // file's weights (tests/oracles/mixtral_hf.py): its GGUF loader has no Mixtral.
    for (const char* name : {"qwen3moe-tiny", "qwen2moe-tiny", "mixtral-tiny"}) {
        CAPTURE(name);
        std::ifstream in(std::string(MINFER_SOURCE_DIR) + "/tests/unit/data/moe_oracle/" + name + ".json");
        REQUIRE(in);
        std::stringstream text;
        text << in.rdbuf();
        const boost::json::value ref = boost::json::parse(text.str());
        const auto prompt = json_array<int32_t>(ref.at("prompt_ids"));
        const auto generated = json_array<int32_t>(ref.at("generated_ids"));
        const auto margins = json_array<double>(ref.at("margins"));
        const auto token_logprobs = json_array<double>(ref.at("token_logprobs"));
        const auto last_row = json_array<double>(ref.at("last_prompt_logprobs"));

        auto backend = make_cpu_backend(2);
        const auto model = Model::load(open_model_source("", std::string(name) + ":f32"), *backend);
        CHECK(model->config().is_moe());
        std::vector<int32_t> seq = prompt;
        seq.insert(seq.end(), generated.begin(), generated.end());
        const auto logits = prefill_logits(*model, seq);
        double worst = 0;
        for (size_t i = 0; i + 1 < seq.size(); ++i)
            worst = std::max(worst, std::abs(log_softmax(logits[i])[size_t(seq[i + 1])] - token_logprobs[i]));
        const auto row = log_softmax(logits[prompt.size() - 1]);
        for (size_t t = 0; t < row.size(); ++t) worst = std::max(worst, std::abs(row[t] - last_row[t]));
        MESSAGE(fmt::format("{}: largest log-prob difference to transformers (float64) {:.2e}", name, worst));
        CHECK(worst < 1e-4);
        // Greedy: our argmax is transformers' token, but at a near tie (printed).
        for (size_t g = 0; g < generated.size(); ++g) {
            const auto& l = logits[prompt.size() - 1 + g];
            const int32_t ours = int32_t(std::max_element(l.begin(), l.end()) - l.begin());
            if (margins[g] < 1e-3)
                MESSAGE(fmt::format("{} step {}: near tie (margin {:.1e}), ours {} theirs {}", name, g, margins[g],
                                    ours, generated[g]));
            else
                CHECK(ours == generated[g]);
        }
    }
}

TEST_CASE("moe: the tiny presets of every dtype load, run, and stay close to f32") {
    const std::vector<int32_t> tokens = {1, 363, 368, 323, 100, 42, 7, 250};
    // test_synth_models.cpp's bounds for a dense model.
    const std::map<SynthDType, double> bounds = {
        {SynthDType::F16, 3e-3}, {SynthDType::BF16, 2e-2}, {SynthDType::Q8_0, 5e-2}, {SynthDType::Q4_K_M, 0.6}};
    for (const char* name : {"qwen3moe-tiny", "qwen2moe-tiny", "mixtral-tiny"}) {
        auto backend = make_cpu_backend(2);
        const auto f32_model = Model::load(open_model_source("", std::string(name) + ":f32"), *backend);
        const auto f32 = prefill_logits(*f32_model, tokens);
        for (SynthDType d : {SynthDType::F16, SynthDType::BF16, SynthDType::Q8_0, SynthDType::Q4_K_M}) {
            CAPTURE(name);
            CAPTURE(synth_dtype_name(d));
            const std::string spec = std::string(name) + ":" + synth_dtype_name(d);
            const auto model = Model::load(open_model_source("", spec), *backend);
            CHECK(model->config().moe.n_experts == 8);
            CHECK(model->config().moe.n_experts_used == 2);
            const auto got = prefill_logits(*model, tokens);
            // A routing decision is discrete: where two experts are nearly tied
            // the dtype's rounding may pick the other one, and that position's
            // logits move as a different FFN's would. The median position
            // shows the storage precision; at most one position may flip.
            std::vector<double> errors;
            for (size_t t = 0; t < tokens.size(); ++t) errors.push_back(relative_rms(got[t], f32[t]));
            std::sort(errors.begin(), errors.end());
            const double median = errors[errors.size() / 2], bound = bounds.at(d);
            MESSAGE(fmt::format("{} {}: logits relative error vs f32, median {:.2e}, worst {:.2e}", name,
                                synth_dtype_name(d), median, errors.back()));
            CHECK(median > 0);
            CHECK(median < bound);
            CHECK(errors[errors.size() - 2] < bound);
        }
    }
}

TEST_CASE("moe: Q4_K_M types as llama-quantize gives an 8-expert model") {
    const auto plan = synth_plan(preset("mixtral-tiny"), SynthDType::Q4_K_M);
    auto type_of = [&](const std::string& name) {
        for (const SynthTensor& t : plan)
            if (t.name == name) return t.type;
        FAIL("no tensor " << name);
        return GGMLType::F32;
    };
    CHECK(type_of("blk.0.attn_k.weight") == GGMLType::Q8_0);
    CHECK(type_of("blk.1.attn_v.weight") == GGMLType::Q8_0);
    CHECK(type_of("blk.0.attn_output.weight") == GGMLType::Q5_K);
    CHECK(type_of("blk.0.ffn_gate_inp.weight") == GGMLType::F32);
    CHECK(type_of("blk.1.ffn_down_exps.weight") == GGMLType::Q6_K);  // use_more_bits: the last eighth
    CHECK(type_of("blk.0.ffn_down_exps.weight") == GGMLType::Q4_K);
    CHECK(type_of("blk.0.ffn_gate_exps.weight") == GGMLType::Q4_K);
    const auto big = synth_plan(preset("qwen3moe-30b-a3b"), SynthDType::Q4_K_M);  // 128 experts: no bump
    for (const SynthTensor& t : big)
        if (t.name == "blk.5.attn_k.weight") CHECK(t.type == GGMLType::Q4_K);
}

namespace {

#define CHECK_CONTAINS(text, part) CHECK_MESSAGE(std::string(text).find(part) != std::string::npos, text)

// The tiny qwen2moe file rewritten: `meta` may change a key's value (return
// false to drop the key), `tensor` a tensor's shape (return false to drop it).
GGUFFile rewritten(const std::function<bool(const std::string&, GGUFWriter&)>& meta,
                   const std::function<bool(const std::string&, std::vector<int64_t>&)>& tensor) {
    const GGUFFile src = open_model_source("", "qwen2moe-tiny:f32");
    GGUFWriter w(src.alignment());
    for (const auto& [key, value] : src.metadata())
        if (key != "general.alignment" && meta(key, w)) w.set_value(key, value);
    for (const GGUFTensorInfo& t : src.tensors()) {
        std::vector<int64_t> ne = t.ne;
        if (!tensor(t.name, ne)) continue;
        std::vector<uint8_t> bytes(t.data, t.data + t.nbytes);
        int64_t elems = 1;
        for (int64_t x : ne) elems *= x;
        bytes.resize(size_t(elems) * 4);
        w.add_tensor(t.name, t.type, ne, std::move(bytes));
    }
    return GGUFFile::from_bytes(w.to_bytes(), "bad-moe");
}

}  // namespace

TEST_CASE("moe: bad files are refused with one clear error") {
    auto backend = make_cpu_backend(1);
    const auto keep_meta = [](const std::string&, GGUFWriter&) { return true; };
    const auto keep_tensor = [](const std::string&, std::vector<int64_t>&) { return true; };
    auto refused = [&](GGUFFile f) {
        try {
            Model::load(std::move(f), *backend);
        } catch (const ModelError& e) {
            return std::string(e.what());
        } catch (const GGUFError& e) {
            return std::string(e.what());
        }
        return std::string("loaded");
    };
    CHECK(refused(rewritten(keep_meta, keep_tensor)) == "loaded");
    CHECK_CONTAINS(refused(rewritten(keep_meta, [](const std::string& n, std::vector<int64_t>&) {
                   return n != "blk.1.ffn_up_exps.weight";
               })),
               "blk.1.ffn_up_exps.weight");
    CHECK_CONTAINS(refused(rewritten(
                   [](const std::string& k, GGUFWriter& w) {
                       if (k != "qwen2moe.expert_used_count") return true;
                       w.set_u32(k, 9);
                       return false;
                   },
                   keep_tensor)),
               "expert_used_count 9 must be between 1 and expert_count 8");
    CHECK_CONTAINS(refused(rewritten([](const std::string& k, GGUFWriter&) { return k != "qwen2moe.expert_count"; },
                                 keep_tensor)),
               "expert_count is missing");
    CHECK_CONTAINS(refused(rewritten(keep_meta,
                                 [](const std::string& n, std::vector<int64_t>& ne) {
                                     if (n == "blk.0.ffn_down_exps.weight") ne = {256, 256, 4};  // 4 experts, not 8
                                     return true;
                                 })),
               "expected [256, 256, 8]");
    CHECK_CONTAINS(refused(rewritten(keep_meta,
                                 [](const std::string& n, std::vector<int64_t>& ne) {
                                     if (n == "blk.0.ffn_gate_exps.weight") ne = {256, 256 * 8};  // 2-D
                                     return true;
                                 })),
               "ffn_gate_exps.weight' has shape");
}

TEST_CASE("moe: the engine batches a MoE model: mixed batch, prefix caching and preemption change no token") {
    using namespace engine_test;
    static Fixture f = [] {
        Fixture x{make_cpu_backend(2), nullptr, nullptr};
        x.model = Model::load(open_model_source("", "qwen3moe-tiny:q8_0"), *x.backend);
        x.tokenizer = Tokenizer::from_gguf(x.model->file());
        return x;
    }();
    std::mt19937 rng(5);
    std::vector<Job> jobs;
    const std::vector<int32_t> shared = random_prompt(rng, 40);  // a common prefix: cached blocks
    for (int i = 0; i < 24; ++i) {
        Job j;
        j.prompt = i % 3 == 0 ? shared : random_prompt(rng, 5 + i * 3);
        if (i % 3 == 0) j.prompt.push_back(3 + i);
        j.options.max_tokens = 6 + i % 9;
        j.options.ignore_eos = true;
        j.options.sampling.temperature = 0.0f;
        jobs.push_back(j);
    }
    EngineConfig alone_config = small_config();
    alone_config.enable_prefix_caching = false;
    std::vector<Result> alone;
    for (const Job& j : jobs) alone.push_back(run({j}, alone_config, nullptr, {}, f)[0]);
    EngineConfig tight = small_config();
    tight.num_kv_blocks = 20;
    tight.max_num_batched_tokens = 32;
    std::vector<int> arrive(jobs.size());
    for (size_t i = 0; i < arrive.size(); ++i) arrive[i] = int(i);
    EngineStats stats;
    const auto together = run(jobs, tight, &stats, arrive, f);
    CHECK(stats.num_preemptions > 0);
    CHECK(stats.prefix_cache_hits > 0);
    for (size_t i = 0; i < jobs.size(); ++i) {
        CAPTURE(i);
        CHECK(together[i].samples.at(0).tokens == alone[i].samples.at(0).tokens);
    }
}
