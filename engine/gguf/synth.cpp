// Synthetic models (synth.h): presets, the tensor plan, the Q4_K_M mix, the
// weight generator and the streaming writer. The vocabulary is in synth_vocab.cpp.
#include "engine/gguf/synth.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <numbers>
#include <stdexcept>
#include <thread>
#include <utility>

#include "kernels/formats/float16.h"
#include "kernels/formats/quant.h"
#include "kernels/sampling.h"  // philox4x32

namespace minfer {

// ---- presets --------------------------------------------------------------------

namespace {

// name, arch, real model, dim, layers, heads, kv heads, ffn, vocab, context,
// tied, qkv bias, rope base, rms eps, then Llama 3.1 rope scaling.
const SynthPreset kPresets[] = {
    // Row lengths are multiples of 256, so every quant type applies.
    {"tiny", "llama", "tiny llama", 256, 2, 4, 2, 512, 1024, 2048, false, false, 10000.0f, 1e-5f},
    // The llama.cpp reference benchmark shape (llama2.c's 110M grown to 32000 tokens).
    {"l134m", "llama", "llama 134M", 768, 12, 12, 12, 2048, 32000, 2048, false, false, 10000.0f, 1e-5f},
    // Llama 3.2 1B with an untied output (1.5 B parameters, the shape the GPU
    // targets were measured on with llama.cpp); rope scaling factor 32.
    {"llama3-1b", "llama", "Llama 3.2 1B", 2048, 16, 32, 8, 8192, 128256, 131072, false, false, 500000.0f, 1e-5f,
     32.0f, 1.0f, 4.0f, 8192},
    // Llama 3.1 8B: its config.json has rope scaling factor 8 (3.2 1B/3B use 32).
    {"llama3-8b", "llama", "Llama 3.1 8B", 4096, 32, 32, 8, 14336, 128256, 131072, false, false, 500000.0f, 1e-5f,
     8.0f, 1.0f, 4.0f, 8192},
    // Llama 3.1 70B, for tensor parallelism's scaling (141 GB in bf16: `synth --layers` for one GPU).
    {"llama3-70b", "llama", "Llama 3.1 70B", 8192, 80, 64, 8, 28672, 128256, 131072, false, false, 500000.0f, 1e-5f,
     8.0f, 1.0f, 4.0f, 8192},
    // Qwen2.5 0.5B: q/k/v biases, NEOX rope, dim 896 (not a multiple of 256: Q4_K_M falls back).
    {"qwen2-0.5b", "qwen2", "Qwen2.5 0.5B", 896, 24, 14, 2, 4864, 151936, 32768, true, true, 1000000.0f, 1e-6f},
    // Gemma 3 270M: head size 256 over 4 query heads and 1 KV head, a 262k vocabulary
    // (tied), sliding window 512 on five layers of six.
    {"gemma3-270m", "gemma3", "Gemma 3 270M", 640, 18, 4, 1, 2048, 262144, 32768, true, false, 1000000.0f, 1e-6f,
     0.0f, 0.0f, 0.0f, 0, 256, 512},
    // Mixtures of experts. The tiny ones (8 experts, 2 a token) are for tests.
    {.name = "qwen3moe-tiny", .arch = "qwen3moe", .real_model = "tiny qwen3moe", .dim = 256, .n_layers = 2,
     .n_heads = 4, .n_kv_heads = 2, .ffn_dim = 512, .vocab_size = 1024, .context_len = 2048, .tied = false,
     .qkv_bias = false, .rope_base = 1000000.0f, .norm_eps = 1e-6f, .n_experts = 8, .n_experts_used = 2,
     .expert_ffn_dim = 256},
    {.name = "qwen2moe-tiny", .arch = "qwen2moe", .real_model = "tiny qwen2moe", .dim = 256, .n_layers = 2,
     .n_heads = 4, .n_kv_heads = 2, .ffn_dim = 512, .vocab_size = 1024, .context_len = 2048, .tied = false,
     .qkv_bias = true, .rope_base = 1000000.0f, .norm_eps = 1e-6f, .n_experts = 8, .n_experts_used = 2,
     .expert_ffn_dim = 256, .shared_ffn_dim = 512},
    // Mixtral is a llama file with experts: each expert is feed_forward_length wide.
    {.name = "mixtral-tiny", .arch = "llama", .real_model = "tiny mixtral", .dim = 256, .n_layers = 2, .n_heads = 4,
     .n_kv_heads = 2, .ffn_dim = 256, .vocab_size = 1024, .context_len = 2048, .tied = false, .qkv_bias = false,
     .rope_base = 1000000.0f, .norm_eps = 1e-5f, .n_experts = 8, .n_experts_used = 2, .expert_ffn_dim = 256},
    // Qwen3-30B-A3B: 48 layers, 128 experts of 768, 8 a token, head size 128 over 32 query heads.
    {.name = "qwen3moe-30b-a3b", .arch = "qwen3moe", .real_model = "Qwen3 30B-A3B", .dim = 2048, .n_layers = 48,
     .n_heads = 32, .n_kv_heads = 4, .ffn_dim = 6144, .vocab_size = 151936, .context_len = 40960, .tied = false,
     .qkv_bias = false, .rope_base = 1000000.0f, .norm_eps = 1e-6f, .key_length = 128, .n_experts = 128,
     .n_experts_used = 8, .expert_ffn_dim = 768},
    // Mixtral 8x7B: Mistral 7B's attention, 8 experts of 14336, 2 a token.
    {.name = "mixtral-8x7b", .arch = "llama", .real_model = "Mixtral 8x7B", .dim = 4096, .n_layers = 32,
     .n_heads = 32, .n_kv_heads = 8, .ffn_dim = 14336, .vocab_size = 32000, .context_len = 32768, .tied = false,
     .qkv_bias = false, .rope_base = 1000000.0f, .norm_eps = 1e-5f, .n_experts = 8, .n_experts_used = 2,
     .expert_ffn_dim = 14336},
    // Qwen1.5-MoE-A2.7B: 60 experts of 1408, 4 a token, and a shared expert of 5632.
    {.name = "qwen2moe-a2.7b", .arch = "qwen2moe", .real_model = "Qwen1.5-MoE A2.7B", .dim = 2048, .n_layers = 24,
     .n_heads = 16, .n_kv_heads = 16, .ffn_dim = 5632, .vocab_size = 151936, .context_len = 8192, .tied = false,
     .qkv_bias = true, .rope_base = 1000000.0f, .norm_eps = 1e-6f, .n_experts = 60, .n_experts_used = 4,
     .expert_ffn_dim = 1408, .shared_ffn_dim = 5632},
};

}  // namespace

std::span<const SynthPreset> synth_presets() { return kPresets; }

bool SynthPreset::is_gemma3() const { return std::string_view(arch) == "gemma3"; }
bool SynthPreset::has_qk_norm() const {
    return is_gemma3() || std::string_view(arch) == "qwen3" || std::string_view(arch) == "qwen3moe";
}

const SynthPreset* find_synth_preset(std::string_view name) {
    for (const SynthPreset& p : kPresets)
        if (name == p.name) return &p;
    return nullptr;
}

// ---- dtypes -----------------------------------------------------------------------

namespace {

struct DTypeRow {
    SynthDType dtype;
    const char* name;
    uint32_t llama_ftype;  // LLAMA_FTYPE_* in llama.h
};
constexpr DTypeRow kDTypes[] = {
    {SynthDType::F32, "f32", 0},   {SynthDType::F16, "f16", 1},       {SynthDType::BF16, "bf16", 32},
    {SynthDType::Q8_0, "q8_0", 7}, {SynthDType::Q4_K_M, "q4_k_m", 15},
};

const DTypeRow& dtype_row(SynthDType d) {
    for (const DTypeRow& r : kDTypes)
        if (r.dtype == d) return r;
    throw std::invalid_argument("unknown synthetic dtype");
}

std::string preset_names() {
    std::vector<std::string> names;
    for (const SynthPreset& p : kPresets) names.emplace_back(p.name);
    return fmt::format("{}", fmt::join(names, ", "));
}

std::string dtype_names() {
    std::vector<std::string> names;
    for (const DTypeRow& r : kDTypes) names.emplace_back(r.name);
    return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

const char* synth_dtype_name(SynthDType d) { return dtype_row(d).name; }
uint32_t synth_llama_ftype(SynthDType d) { return dtype_row(d).llama_ftype; }

bool parse_synth_dtype(std::string_view s, SynthDType& out) {
    for (const DTypeRow& r : kDTypes)
        if (s == r.name) {
            out = r.dtype;
            return true;
        }
    return false;
}

SynthSpec parse_synth_spec(std::string_view spec) {
    const size_t colon = spec.find(':');
    const std::string_view name = spec.substr(0, colon);
    SynthSpec s{find_synth_preset(name)};
    if (!s.preset)
        throw std::invalid_argument(fmt::format("unknown synthetic preset '{}' (presets: {})", name, preset_names()));
    if (colon != std::string_view::npos && !parse_synth_dtype(spec.substr(colon + 1), s.dtype))
        throw std::invalid_argument(
            fmt::format("unknown synthetic dtype '{}' (dtypes: {})", spec.substr(colon + 1), dtype_names()));
    return s;
}

// ---- the tensor plan and the Q4_K_M mix ---------------------------------------------

// llama.cpp's Q4_K_M, as llama_tensor_get_type in src/llama-quant.cpp decides it
// (not 70B, not Falcon):
//   - output.weight, and token_embd.weight when it doubles as the output
//     (tied: the file has no output.weight): Q6_K, but Q8_0 when the row
//     length is not a multiple of Q4_K's 256;
//   - attn_v and ffn_down: Q6_K on the layers where use_more_bits(i, n), the
//     first and last eighth and every third layer between, else Q4_K;
//   - everything else, token_embd included when untied: Q4_K;
//   - with exactly 8 experts (Mixtral and its kin): attn_k and attn_v Q8_0,
//     attn_output Q5_K; an expert tensor counts as its kind (ffn_down_exps is
//     an ffn_down, on its layer); the routers are never quantized;
//   - then tensor_type_fallback: a row length that is not a multiple of 256
//     turns Q4_K into Q5_0, Q5_K into Q5_1 and Q6_K into Q8_0.
GGMLType q4_k_m_type(SynthRole role, int32_t layer, int32_t n_layers, int64_t cols, bool tied, int32_t n_experts) {
    const auto use_more_bits = [](int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; };
    if (role == SynthRole::Router || role == SynthRole::SharedGate) return GGMLType::F32;
    const bool down = role == SynthRole::FfnDown || role == SynthRole::FfnDownExps;
    GGMLType t = GGMLType::Q4_K;
    if (role == SynthRole::Output || (tied && role == SynthRole::TokenEmbd))
        t = cols % kQK_K != 0 ? GGMLType::Q8_0 : GGMLType::Q6_K;
    else if ((role == SynthRole::AttnV || down) && use_more_bits(layer, n_layers))
        t = GGMLType::Q6_K;
    if (n_experts == 8) {
        if (role == SynthRole::AttnV || role == SynthRole::AttnK) t = GGMLType::Q8_0;
        if (role == SynthRole::AttnOutput) t = GGMLType::Q5_K;
    }

    if (cols % kQK_K != 0) {
        if (t == GGMLType::Q4_K) t = GGMLType::Q5_0;
        else if (t == GGMLType::Q5_K) t = GGMLType::Q5_1;
        else if (t == GGMLType::Q6_K) t = GGMLType::Q8_0;
    }
    return t;
}

namespace {

bool is_matrix(SynthRole r) {
    return r != SynthRole::Norm && r != SynthRole::Bias && r != SynthRole::RopeFreqs && r != SynthRole::Router &&
           r != SynthRole::SharedGate;
}

GGMLType matrix_type(const SynthPreset& p, SynthDType d, SynthRole role, int32_t layer, int64_t cols) {
    switch (d) {
        case SynthDType::F32: return GGMLType::F32;
        case SynthDType::F16: return GGMLType::F16;
        case SynthDType::BF16: return GGMLType::BF16;
        case SynthDType::Q8_0: return GGMLType::Q8_0;  // llama.cpp's Q8_0 keeps output.weight Q8_0 too
        case SynthDType::Q4_K_M: return q4_k_m_type(role, layer, p.n_layers, cols, p.tied, p.n_experts);
    }
    return GGMLType::F32;
}

}  // namespace

std::vector<SynthTensor> synth_plan(const SynthPreset& p, SynthDType dtype) {
    std::vector<SynthTensor> plan;
    const int64_t q_dim = int64_t(p.n_heads) * p.head_dim(), kv_dim = int64_t(p.n_kv_heads) * p.head_dim();
    auto add = [&](std::string name, SynthRole role, int32_t layer, std::vector<int64_t> ne) {
        const GGMLType t = is_matrix(role) ? matrix_type(p, dtype, role, layer, ne[0]) : GGMLType::F32;
        plan.push_back({std::move(name), role, layer, t, std::move(ne)});
    };

    add("token_embd.weight", SynthRole::TokenEmbd, -1, {p.dim, p.vocab_size});
    if (p.rope_factor > 0) add("rope_freqs.weight", SynthRole::RopeFreqs, -1, {p.head_dim() / 2});
    for (int32_t l = 0; l < p.n_layers; ++l) {
        const std::string b = fmt::format("blk.{}.", l);
        add(b + "attn_norm.weight", SynthRole::Norm, l, {p.dim});
        add(b + "attn_q.weight", SynthRole::AttnQ, l, {p.dim, q_dim});
        add(b + "attn_k.weight", SynthRole::AttnK, l, {p.dim, kv_dim});
        add(b + "attn_v.weight", SynthRole::AttnV, l, {p.dim, kv_dim});
        if (p.qkv_bias) {
            add(b + "attn_q.bias", SynthRole::Bias, l, {q_dim});
            add(b + "attn_k.bias", SynthRole::Bias, l, {kv_dim});
            add(b + "attn_v.bias", SynthRole::Bias, l, {kv_dim});
        }
        if (p.has_qk_norm()) {
            add(b + "attn_q_norm.weight", SynthRole::Norm, l, {p.head_dim()});
            add(b + "attn_k_norm.weight", SynthRole::Norm, l, {p.head_dim()});
        }
        add(b + "attn_output.weight", SynthRole::AttnOutput, l, {q_dim, p.dim});
        if (p.is_gemma3()) add(b + "post_attention_norm.weight", SynthRole::Norm, l, {p.dim});
        add(b + "ffn_norm.weight", SynthRole::Norm, l, {p.dim});
        if (p.is_moe()) {  // llama.cpp's order: router, experts, shared expert
            const int64_t e = p.n_experts, f = p.expert_ffn_dim;
            add(b + "ffn_gate_inp.weight", SynthRole::Router, l, {p.dim, e});
            add(b + "ffn_gate_exps.weight", SynthRole::FfnGateExps, l, {p.dim, f, e});
            add(b + "ffn_down_exps.weight", SynthRole::FfnDownExps, l, {f, p.dim, e});
            add(b + "ffn_up_exps.weight", SynthRole::FfnUpExps, l, {p.dim, f, e});
            if (p.shared_ffn_dim > 0) {
                add(b + "ffn_gate_inp_shexp.weight", SynthRole::SharedGate, l, {p.dim});
                add(b + "ffn_gate_shexp.weight", SynthRole::FfnGate, l, {p.dim, p.shared_ffn_dim});
                add(b + "ffn_down_shexp.weight", SynthRole::FfnDown, l, {p.shared_ffn_dim, p.dim});
                add(b + "ffn_up_shexp.weight", SynthRole::FfnUp, l, {p.dim, p.shared_ffn_dim});
            }
        } else {
            add(b + "ffn_gate.weight", SynthRole::FfnGate, l, {p.dim, p.ffn_dim});
            add(b + "ffn_up.weight", SynthRole::FfnUp, l, {p.dim, p.ffn_dim});
            add(b + "ffn_down.weight", SynthRole::FfnDown, l, {p.ffn_dim, p.dim});
        }
        if (p.is_gemma3()) add(b + "post_ffw_norm.weight", SynthRole::Norm, l, {p.dim});
    }
    add("output_norm.weight", SynthRole::Norm, -1, {p.dim});
    if (!p.tied) add("output.weight", SynthRole::Output, -1, {p.dim, p.vocab_size});
    return plan;
}

// ---- values ---------------------------------------------------------------------------

// Llama 3.1's rope scaling as Meta's reference code and llama.cpp's converter
// compute it: frequencies whose wavelength is shorter than
// original_context / high_freq_factor are kept (divisor 1), those longer than
// original_context / low_freq_factor are slowed down by `factor`, and the
// band between is interpolated smoothly.
std::vector<float> synth_rope_freqs(const SynthPreset& p) {
    if (p.rope_factor <= 0) return {};
    const int n_rot = p.head_dim();
    const double low_wavelen = p.rope_original_context / p.rope_low_freq_factor;
    const double high_wavelen = p.rope_original_context / p.rope_high_freq_factor;
    std::vector<float> f(static_cast<size_t>(n_rot / 2));
    for (int i = 0; i < n_rot / 2; ++i) {
        const double freq = 1.0 / std::pow(double(p.rope_base), 2.0 * i / n_rot);
        const double wavelen = 2 * std::numbers::pi / freq;
        double divisor;
        if (wavelen < high_wavelen) {
            divisor = 1.0;
        } else if (wavelen > low_wavelen) {
            divisor = p.rope_factor;
        } else {
            const double smooth = (p.rope_original_context / wavelen - p.rope_low_freq_factor) /
                                  (p.rope_high_freq_factor - p.rope_low_freq_factor);
            divisor = 1.0 / ((1 - smooth) / p.rope_factor + smooth);
        }
        f[static_cast<size_t>(i)] = static_cast<float>(divisor);
    }
    return f;
}

namespace {

uint64_t fnv1a(std::string_view s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
    return h;
}

// Four N(0, 1) samples, number 4*block .. 4*block+3 of the stream (seed, key):
// Philox4x32-10 (counter-based, so any block can be computed on its own) and
// two Box-Muller pairs.
void normal4(uint64_t seed, uint64_t key, uint64_t block, float out[4]) {
    const auto r = philox4x32({static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                               static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32)},
                              {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
    for (int pair = 0; pair < 2; ++pair) {
        // u in (0, 1], so the log is finite; 24 bits are exact in a float.
        const float u = static_cast<float>((r[2 * pair] >> 8) + 1) * 0x1.0p-24f;
        const float angle = static_cast<float>(r[2 * pair + 1] >> 8) * (0x1.0p-24f * 2 * std::numbers::pi_v<float>);
        const float radius = std::sqrt(-2.0f * std::log(u));
        out[2 * pair] = radius * std::cos(angle);
        out[2 * pair + 1] = radius * std::sin(angle);
    }
}

// Weight statistics. A matrix has N(0, 1/sqrt(row length)) entries, so each
// row has about unit norm and a unit-RMS input gives unit-RMS outputs: the
// activations of a random model stay O(1) through all layers, and logits stay
// near N(0, 1), whether or not the embedding doubles as the LM head.
// RMSNorm gains are about 1, biases small.
struct Stats {
    float mean, sigma;
};
Stats stats_of(const SynthTensor& t) {
    switch (t.role) {
        case SynthRole::Norm: return {1.0f, 0.05f};
        case SynthRole::Bias: return {0.0f, 0.1f};
        default: return {0.0f, 1.0f / std::sqrt(static_cast<float>(t.cols()))};
    }
}

}  // namespace

void synth_f32_row(const SynthPreset& p, const SynthTensor& t, uint64_t seed, int64_t row, float* out) {
    const int64_t n = t.cols();
    if (t.role == SynthRole::RopeFreqs) {
        const std::vector<float> f = synth_rope_freqs(p);
        std::copy(f.begin(), f.end(), out);
        return;
    }
    const Stats s = stats_of(t);
    const uint64_t key = fnv1a(t.name);
    const uint64_t first = static_cast<uint64_t>(row) * static_cast<uint64_t>(n);  // element index of out[0]
    float z[4];
    for (int64_t i = 0; i < n;) {
        const uint64_t e = first + static_cast<uint64_t>(i);
        normal4(seed, key, e / 4, z);
        for (uint64_t lane = e % 4; lane < 4 && i < n; ++lane, ++i) out[i] = s.mean + s.sigma * z[lane];
    }
}

// ---- encoding rows ----------------------------------------------------------------------

namespace {

int thread_count(int threads) {
    return threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// fn(begin, end) over [0, n) split into one contiguous range per thread.
// Exceptions are rethrown in the caller.
void parallel_for(int threads, int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
    const int parts = static_cast<int>(std::clamp<int64_t>(n, 1, threads));
    if (parts == 1) return fn(0, n);
    std::vector<std::exception_ptr> errors(static_cast<size_t>(parts));
    std::vector<std::thread> workers;
    const int64_t chunk = (n + parts - 1) / parts;
    for (int k = 0; k < parts; ++k) {
        auto part = [&, k] {
            try {
                fn(std::min(n, k * chunk), std::min(n, (k + 1) * chunk));
            } catch (...) {
                errors[static_cast<size_t>(k)] = std::current_exception();
            }
        };
        if (k + 1 < parts) workers.emplace_back(part);
        else part();  // the calling thread takes the last part
    }
    for (auto& w : workers) w.join();
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
}

// Rows [r0, r1) of t in its file type, into dst.
void encode_rows(const SynthPreset& p, const SynthTensor& t, uint64_t seed, int64_t r0, int64_t r1, uint8_t* dst,
                 int threads) {
    const int64_t n = t.cols();
    const uint64_t row_bytes = ggml_row_bytes(t.type, n);
    parallel_for(threads, r1 - r0, [&](int64_t begin, int64_t end) {
        std::vector<float> x(static_cast<size_t>(n));
        for (int64_t r = begin; r < end; ++r) {
            synth_f32_row(p, t, seed, r0 + r, x.data());
            uint8_t* out = dst + static_cast<uint64_t>(r) * row_bytes;
            switch (t.type) {
                case GGMLType::F32: std::memcpy(out, x.data(), row_bytes); break;
                case GGMLType::F16:
                case GGMLType::BF16:
                    for (int64_t i = 0; i < n; ++i) {
                        const uint16_t h = t.type == GGMLType::F16 ? f32_to_fp16(x[i]) : f32_to_bf16(x[i]);
                        std::memcpy(out + 2 * i, &h, 2);
                    }
                    break;
                default: quantize_row(t.type, x.data(), out, n); break;
            }
        }
    });
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// Bytes of memory the kernel says are available (MemAvailable); 0 if unknown.
uint64_t available_memory() {
    std::ifstream in("/proc/meminfo");
    std::string key;
    uint64_t kib = 0;
    std::string unit;
    while (in >> key >> kib >> unit)
        if (key == "MemAvailable:") return kib * 1024;
    return 0;
}

}  // namespace

// ---- the file -------------------------------------------------------------------------------

GGUFWriter synth_header(const SynthPreset& p, SynthDType dtype, uint64_t seed, bool tensors) {
    GGUFWriter w;
    const std::string a = std::string(p.arch) + ".";
    w.set_string("general.architecture", p.arch);
    w.set_string("general.name", fmt::format("minfer-synth-{}", p.name));
    w.set_string("general.description",
                 fmt::format("Random weights in the shape of {} (minfer synth --preset {} --dtype {} --seed {}); "
                             "not a trained model.", p.real_model, p.name, synth_dtype_name(dtype), seed));
    w.set_u32("general.file_type", synth_llama_ftype(dtype));
    w.set_u32("general.quantization_version", 2);  // GGML_QNT_VERSION, as llama.cpp's writers store it

    // llama.cpp checks these types exactly: u32 sizes, f32 eps and base.
    w.set_u32(a + "vocab_size", static_cast<uint32_t>(p.vocab_size));
    w.set_u32(a + "context_length", static_cast<uint32_t>(p.context_len));
    w.set_u32(a + "embedding_length", static_cast<uint32_t>(p.dim));
    w.set_u32(a + "block_count", static_cast<uint32_t>(p.n_layers));
    w.set_u32(a + "feed_forward_length", static_cast<uint32_t>(p.ffn_dim));
    w.set_u32(a + "attention.head_count", static_cast<uint32_t>(p.n_heads));
    w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(p.n_kv_heads));
    w.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(p.head_dim()));
    w.set_f32(a + "rope.freq_base", p.rope_base);
    w.set_f32(a + "attention.layer_norm_rms_epsilon", p.norm_eps);
    if (p.key_length > 0) {
        w.set_u32(a + "attention.key_length", static_cast<uint32_t>(p.key_length));
        w.set_u32(a + "attention.value_length", static_cast<uint32_t>(p.key_length));
    }
    if (p.sliding_window > 0) w.set_u32(a + "attention.sliding_window", static_cast<uint32_t>(p.sliding_window));
    if (p.is_moe()) {  // Mixtral's converter writes no expert width: the experts are feed_forward_length wide
        w.set_u32(a + "expert_count", static_cast<uint32_t>(p.n_experts));
        w.set_u32(a + "expert_used_count", static_cast<uint32_t>(p.n_experts_used));
        if (std::string_view(p.arch) != "llama")
            w.set_u32(a + "expert_feed_forward_length", static_cast<uint32_t>(p.expert_ffn_dim));
        if (p.shared_ffn_dim > 0)
            w.set_u32(a + "expert_shared_feed_forward_length", static_cast<uint32_t>(p.shared_ffn_dim));
    }

    const SynthVocab v = synth_vocab(p.vocab_size);
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_string("tokenizer.ggml.pre", "default");
    w.set_string_array("tokenizer.ggml.tokens", v.tokens);
    w.set_f32_array("tokenizer.ggml.scores", v.scores);
    w.set_i32_array("tokenizer.ggml.token_type", v.types);
    w.set_u32("tokenizer.ggml.bos_token_id", 1);
    w.set_u32("tokenizer.ggml.eos_token_id", 2);
    w.set_u32("tokenizer.ggml.unknown_token_id", 0);
    w.set_bool("tokenizer.ggml.add_bos_token", true);
    w.set_bool("tokenizer.ggml.add_eos_token", false);

    if (tensors)
        for (const SynthTensor& t : synth_plan(p, dtype)) w.add_tensor_info(t.name, t.type, t.ne);
    return w;
}

uint64_t synth_image_size(const SynthPreset& p, SynthDType dtype) {
    const GGUFWriter w = synth_header(p, dtype, 0);
    uint64_t size = w.header_bytes().size();
    for (const SynthTensor& t : synth_plan(p, dtype)) size += align_up(t.nbytes(), w.alignment());
    return size;
}

std::vector<uint8_t> synth_image(const SynthPreset& p, SynthDType dtype, const SynthOptions& opt) {
    const GGUFWriter w = synth_header(p, dtype, opt.seed);
    const std::vector<SynthTensor> plan = synth_plan(p, dtype);
    std::vector<uint8_t> image = w.header_bytes();
    const uint64_t data_start = image.size();
    uint64_t size = data_start;
    for (const SynthTensor& t : plan) size += align_up(t.nbytes(), w.alignment());

    const uint64_t avail = available_memory();
    if (avail > 0 && size > avail)
        throw std::runtime_error(fmt::format(
            "synthetic {}:{} needs {:.1f} GiB in memory, more than the {:.1f} GiB available; write it to a file "
            "with `minfer synth --preset {} --dtype {} -o FILE` (files are memory-mapped) or pick a smaller dtype",
            p.name, synth_dtype_name(dtype), size / 1073741824.0, avail / 1073741824.0, p.name,
            synth_dtype_name(dtype)));

    image.resize(size);  // zeros: the padding between tensors
    const int threads = thread_count(opt.threads);
    uint64_t offset = data_start;
    for (const SynthTensor& t : plan) {
        encode_rows(p, t, opt.seed, 0, t.rows(), image.data() + offset, threads);
        offset += align_up(t.nbytes(), w.alignment());
    }
    return image;
}

namespace {

// A file being written: closed and removed again unless finish() succeeds,
// so an error (I/O, or a throw while generating) leaves no half file behind.
class OutFile {
public:
    explicit OutFile(const std::string& path) : path_(path), f_(std::fopen(path.c_str(), "wb")) {
        if (!f_) throw GGUFError(fmt::format("{}: cannot create: {}", path, std::strerror(errno)));
    }
    ~OutFile() {
        if (f_) {
            std::fclose(f_);
            std::remove(path_.c_str());
        }
    }
    void put(const void* data, size_t n) {
        if (std::fwrite(data, 1, n, f_) != n)
            throw GGUFError(fmt::format("{}: write failed after {} bytes: {}", path_, written_, std::strerror(errno)));
        written_ += n;
    }
    uint64_t finish() {
        std::FILE* f = std::exchange(f_, nullptr);
        if (std::fclose(f) != 0) {
            const int err = errno;
            std::remove(path_.c_str());
            throw GGUFError(fmt::format("{}: cannot finish writing: {}", path_, std::strerror(err)));
        }
        return written_;
    }

private:
    std::string path_;
    std::FILE* f_;
    uint64_t written_ = 0;
};

}  // namespace

uint64_t synth_write_file(const SynthPreset& p, SynthDType dtype, const std::string& path, const SynthOptions& opt) {
    const GGUFWriter w = synth_header(p, dtype, opt.seed);
    const std::vector<SynthTensor> plan = synth_plan(p, dtype);
    const int threads = thread_count(opt.threads);

    OutFile out(path);
    const std::vector<uint8_t> header = w.header_bytes();
    out.put(header.data(), header.size());
    // Rows are generated a chunk at a time, all threads on one chunk, so
    // memory stays at one chunk whatever the size of the tensor.
    constexpr uint64_t kChunkBytes = 64ull << 20;
    std::vector<uint8_t> buf;
    const std::vector<uint8_t> zeros(w.alignment(), 0);
    for (const SynthTensor& t : plan) {
        const uint64_t row_bytes = ggml_row_bytes(t.type, t.cols());
        const int64_t chunk_rows = static_cast<int64_t>(std::max<uint64_t>(1, kChunkBytes / row_bytes));
        for (int64_t r0 = 0; r0 < t.rows(); r0 += chunk_rows) {
            const int64_t r1 = std::min(t.rows(), r0 + chunk_rows);
            buf.resize(static_cast<size_t>(row_bytes * static_cast<uint64_t>(r1 - r0)));
            encode_rows(p, t, opt.seed, r0, r1, buf.data(), threads);
            out.put(buf.data(), buf.size());
        }
        out.put(zeros.data(), align_up(t.nbytes(), w.alignment()) - t.nbytes());
    }
    return out.finish();
}

}  // namespace minfer
