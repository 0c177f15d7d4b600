#include "engine/model/model.h"

#include <fmt/format.h>

#include <cmath>

#include "kernels/formats/float16.h"
#include <cstring>

namespace minfer {

namespace {

const Architecture kArchitectures[] = {
    // Llama 2/3/3.x, Mistral, TinyLlama, SmolLM, llama2.c checkpoints.
    {"llama", /*rope_neox=*/false, /*qkv_bias=*/false},
    {"qwen2", /*rope_neox=*/true, /*qkv_bias=*/true},
    {"qwen3", /*rope_neox=*/true, /*qkv_bias=*/false, /*qk_norm=*/true},
    // Qwen1.5-MoE, Qwen2-MoE: qwen2's attention; routed experts whose weights
    // are not renormalised, and a shared expert gated by sigmoid(x . w).
    {"qwen2moe", /*rope_neox=*/true, /*qkv_bias=*/true, /*qk_norm=*/false, /*post_norms=*/false,
     /*embed_scale=*/false, FfnActivation::SiLU, /*swa_pattern=*/0, /*rope_base_swa=*/0, /*moe_required=*/true,
     /*moe_renormalize=*/false, /*moe_shared_expert=*/true},
    // Qwen3-MoE (30B-A3B, 235B-A22B): qwen3's attention; top-k renormalised.
    {"qwen3moe", /*rope_neox=*/true, /*qkv_bias=*/false, /*qk_norm=*/true, /*post_norms=*/false,
     /*embed_scale=*/false, FfnActivation::SiLU, /*swa_pattern=*/0, /*rope_base_swa=*/0, /*moe_required=*/true},
    // Gemma 3: GeGLU, q/k norms, norms after attention and FFN too, embeddings
    // scaled by sqrt(dim); five sliding-window layers (rope base 10k) to one global.
    // The GGUF converter has already added Gemma's +1 to every norm weight.
    {"gemma3", /*rope_neox=*/true, /*qkv_bias=*/false, /*qk_norm=*/true, /*post_norms=*/true,
     /*embed_scale=*/true, FfnActivation::GELU, /*swa_pattern=*/6, /*rope_base_swa=*/10000.0f},
};

int32_t get_dim(const GGUFFile& f, const std::string& key) {
    const uint64_t v = f.get_uint(key);
    if (v == 0 || v > (1u << 24)) throw ModelError(fmt::format("{}: {} = {} is out of range", f.path(), key, v));
    return static_cast<int32_t>(v);
}

// The expert keys as llama.cpp reads them: expert_count and expert_used_count
// (a llama file with experts is Mixtral); expert_feed_forward_length, else
// feed_forward_length / expert_used_count for qwen2moe and qwen3moe and
// feed_forward_length for Mixtral; qwen2moe's expert_shared_feed_forward_length,
// else feed_forward_length.
void read_moe_config(const GGUFFile& f, const Architecture& arch, ModelConfig& c) {
    const std::string p = c.arch + ".";
    if (!f.has(p + "expert_count") || f.get_uint(p + "expert_count") == 0) {
        if (arch.moe_required)
            throw ModelError(fmt::format("{}: {} is a mixture-of-experts architecture, but {}expert_count is missing",
                                         f.path(), c.arch, p));
        return;
    }
    MoeConfig& m = c.moe;
    m.n_experts = get_dim(f, p + "expert_count");
    if (!f.has(p + "expert_used_count"))
        throw ModelError(fmt::format("{}: {}expert_used_count is missing", f.path(), p));
    const uint64_t used = f.get_uint(p + "expert_used_count");
    if (used == 0 || used > uint64_t(m.n_experts))
        throw ModelError(fmt::format("{}: expert_used_count {} must be between 1 and expert_count {}", f.path(), used,
                                     m.n_experts));
    m.n_experts_used = int32_t(used);
    if (f.has(p + "expert_feed_forward_length"))
        m.expert_ffn_dim = get_dim(f, p + "expert_feed_forward_length");
    else
        m.expert_ffn_dim = arch.moe_required ? c.ffn_dim / m.n_experts_used : c.ffn_dim;
    if (m.expert_ffn_dim <= 0) throw ModelError(fmt::format("{}: the experts' FFN width is 0", f.path()));
    if (arch.moe_shared_expert)
        m.shared_ffn_dim = f.has(p + "expert_shared_feed_forward_length")
                               ? get_dim(f, p + "expert_shared_feed_forward_length")
                               : c.ffn_dim;
    m.renormalize = arch.moe_renormalize;
    if (c.ffn_act != FfnActivation::SiLU)
        throw ModelError(fmt::format("{}: experts with a GELU FFN are not supported", f.path()));
}

}  // namespace

const Architecture* find_architecture(const std::string& name) {
    for (const auto& a : kArchitectures)
        if (name == a.name) return &a;
    return nullptr;
}

std::vector<std::string> supported_architectures() {
    std::vector<std::string> names;
    for (const auto& a : kArchitectures) names.emplace_back(a.name);
    return names;
}

ModelConfig ModelConfig::from_gguf(const GGUFFile& f) {
    ModelConfig c;
    c.arch = f.get_string("general.architecture");
    const Architecture* arch = find_architecture(c.arch);
    if (!arch)
        throw ModelError(fmt::format("{}: architecture '{}' is not supported (supported: {})", f.path(), c.arch,
                                     fmt::join(supported_architectures(), ", ")));
    const std::string p = c.arch + ".";
    c.n_layers = get_dim(f, p + "block_count");
    c.dim = get_dim(f, p + "embedding_length");
    c.n_heads = get_dim(f, p + "attention.head_count");
    c.n_kv_heads = f.has(p + "attention.head_count_kv") ? get_dim(f, p + "attention.head_count_kv") : c.n_heads;
    c.ffn_dim = get_dim(f, p + "feed_forward_length");
    c.context_len = get_dim(f, p + "context_length");
    c.head_dim = f.has(p + "attention.key_length") ? get_dim(f, p + "attention.key_length") : c.dim / c.n_heads;
    c.norm_eps = static_cast<float>(f.get_float_or(p + "attention.layer_norm_rms_epsilon", 1e-5));
    c.rope_neox = arch->rope_neox;
    c.qkv_bias = arch->qkv_bias;
    c.qk_norm = arch->qk_norm;
    c.post_norms = arch->post_norms;
    c.embed_scale = arch->embed_scale;
    c.ffn_act = arch->ffn_act;
    c.attn_scale = 1.0f / std::sqrt(float(c.head_dim));
    // Gemma 3 27B scales by the model width over the heads instead (query_pre_attn_scalar).
    if (c.arch == "gemma3" && c.n_layers == 62) c.attn_scale = 1.0f / std::sqrt(float(c.dim / c.n_heads));
    if (arch->swa_pattern > 0 && f.has(p + "attention.sliding_window")) {
        c.sliding_window = get_dim(f, p + "attention.sliding_window");
        c.swa_pattern = arch->swa_pattern;
    }
    if (c.n_heads % c.n_kv_heads != 0)
        throw ModelError(fmt::format("{}: head_count {} is not a multiple of head_count_kv {}", f.path(), c.n_heads,
                                     c.n_kv_heads));
    if (f.has(p + "attention.value_length") && f.get_uint(p + "attention.value_length") != uint64_t(c.head_dim))
        throw ModelError(fmt::format("{}: different key and value head sizes are not supported", f.path()));

    c.rope.n_rot = f.has(p + "rope.dimension_count") ? get_dim(f, p + "rope.dimension_count") : c.head_dim;
    if (c.rope.n_rot > c.head_dim || c.rope.n_rot % 2)
        throw ModelError(fmt::format("{}: rope.dimension_count {} does not fit head size {}", f.path(), c.rope.n_rot,
                                     c.head_dim));
    c.rope.base = static_cast<float>(f.get_float_or(p + "rope.freq_base", 10000.0));
    c.rope.neox = c.rope_neox;
    const std::string scaling = f.get_string_or(p + "rope.scaling.type", "none");
    if (scaling == "linear") {
        const double factor = f.get_float(p + "rope.scaling.factor");
        if (!(factor > 0)) throw ModelError(fmt::format("{}: rope.scaling.factor must be > 0", f.path()));
        c.rope.position_scale = static_cast<float>(1.0 / factor);
    } else if (scaling != "none") {
        throw ModelError(fmt::format("{}: rope scaling '{}' is not supported", f.path(), scaling));
    }
    // Sliding layers keep their own base and no scaling (llama.cpp's freq_base_swa).
    c.rope_swa = c.rope;
    if (arch->rope_base_swa > 0) {
        c.rope_swa.base = arch->rope_base_swa;
        c.rope_swa.position_scale = 1.0f;
    }

    read_moe_config(f, *arch, c);

    const GGUFTensorInfo& embd = f.tensor("token_embd.weight");
    c.vocab_size = static_cast<int32_t>(embd.rows());
    c.tied_output = f.find_tensor("output.weight") == nullptr;
    c.has_rope_freqs = f.find_tensor("rope_freqs.weight") != nullptr;
    return c;
}

double ExpertWeights::fraction_read(int32_t tokens) const {
    if (n_experts <= 0) return 0.0;
    return 1.0 - std::pow(1.0 - double(n_experts_used) / n_experts, std::max(tokens, 0));
}

ExpertWeights expert_weights(const GGUFFile& f) {
    ExpertWeights x;
    const std::string p = f.get_string_or("general.architecture", "") + ".";
    if (!f.has(p + "expert_count") || !f.has(p + "expert_used_count")) return x;
    x.n_experts = int32_t(f.get_uint(p + "expert_count"));
    x.n_experts_used = int32_t(f.get_uint(p + "expert_used_count"));
    for (const GGUFTensorInfo& t : f.tensors())
        if (t.name.ends_with("_exps.weight")) {
            x.params += uint64_t(t.n_elements());
            x.bytes += t.nbytes;
        }
    return x;
}

TensorSplit TensorSplit::of(const ModelConfig& c, int32_t rank, int32_t size, bool expert_parallel,
                            const std::string& path) {
    TensorSplit t;
    t.rank = rank;
    t.size = size;
    auto refuse = [&](const std::string& why) {
        throw ModelError(fmt::format("{}: tensor parallelism over {} ranks: {}", path, size, why));
    };
    if (size < 1 || rank < 0 || rank >= size) refuse(fmt::format("rank {} is not one of them", rank));
    if (c.is_moe() && size > 1 && !expert_parallel)
        refuse("a mixture-of-experts model's experts are split whole among the ranks: pass --enable-expert-parallel");
    if (c.is_moe() && c.moe.n_experts % size)
        refuse(fmt::format("the {} experts do not divide among the ranks", c.moe.n_experts));
    if (c.n_heads % size) refuse(fmt::format("the {} attention heads do not divide among the ranks", c.n_heads));
    if (c.n_kv_heads % size && size % c.n_kv_heads)
        refuse(fmt::format("the {} KV heads neither divide among the ranks nor the ranks among them", c.n_kv_heads));
    if (c.dense_ffn_dim() % size)
        refuse(fmt::format("the FFN's {} features do not divide among the ranks", c.dense_ffn_dim()));
    t.n_heads = c.n_heads / size;
    if (c.n_kv_heads >= size) {
        t.n_kv_heads = c.n_kv_heads / size;
        t.kv_shard = rank;
        t.kv_shards = size;
    } else {  // fewer KV heads than ranks: each rank keeps the one its query heads read
        t.n_kv_heads = 1;
        t.kv_shard = rank / (size / c.n_kv_heads);
        t.kv_shards = c.n_kv_heads;
    }
    t.ffn_dim = c.dense_ffn_dim() / size;
    t.n_experts = c.moe.n_experts / size;
    t.first_expert = rank * t.n_experts;
    return t;
}

Model::Model(GGUFFile file, Backend& backend) : file_(std::move(file)), backend_(backend) {}

Model::~Model() {
    for (void* p : vectors_) backend_.free(p);
}

std::unique_ptr<Model> Model::load(const std::string& path, Backend& backend, const Group* group) {
    return load(GGUFFile::open(path), backend, group);
}

std::unique_ptr<Model> Model::load(GGUFFile file, Backend& backend, const Group* group) {
    std::unique_ptr<Model> m(new Model(std::move(file), backend));
    m->group_ = group;
    const GGUFFile& f = m->file_;
    ModelConfig& c = m->config_ = ModelConfig::from_gguf(f);
    const TensorSplit split = TensorSplit::of(c, group ? group->rank() : 0, group ? group->size() : 1,
                                              group && group->expert_parallel, f.path());

    // What the backend packs; a type it cannot run becomes the file's error.
    auto packed = [&](auto pack) {
        try {
            return pack();
        } catch (const std::invalid_argument& e) {
            throw ModelError(fmt::format("{}: {}", f.path(), e.what()));
        }
    };
    // A matrix: GGUF ne = [cols, rows]; checked against the shape the config implies.
    // `shard`: this rank's part (the whole matrix by default).
    auto matrix = [&](const std::string& name, int64_t rows, int64_t cols, ShardSpec shard = {}) {
        const GGUFTensorInfo& t = f.tensor(name);
        if (t.ne.size() != 2 || t.ne[0] != cols || t.ne[1] != rows)
            throw ModelError(fmt::format("{}: tensor '{}' has shape [{}], expected [{}, {}]", f.path(), name,
                                         fmt::join(t.ne, ", "), cols, rows));
        return packed([&] { return backend.pack_weight({name, t.type, rows, cols, t.data}, shard); });
    };
    // A vector, converted to float32 and uploaded; `shard` (dim 0) picks this
    // rank's slice of it, as a column-parallel layer's bias.
    auto vector = [&](const std::string& name, int64_t n, ShardSpec shard = {}) -> float* {
        const GGUFTensorInfo& t = f.tensor(name);
        if (t.n_elements() != n)
            throw ModelError(fmt::format("{}: tensor '{}' has {} elements, expected {}", f.path(), name,
                                         t.n_elements(), n));
        const int64_t first = n * shard.index / shard.count;
        n = n * (shard.index + 1) / shard.count - first;
        std::vector<float> v(n);
        for (int64_t j = 0; j < n; ++j) {
            const int64_t i = first + j;
            uint16_t h;
            switch (t.type) {
                case GGMLType::F32: std::memcpy(&v[j], t.data + 4 * i, 4); break;
                case GGMLType::F16: std::memcpy(&h, t.data + 2 * i, 2); v[j] = fp16_to_f32(h); break;
                case GGMLType::BF16: std::memcpy(&h, t.data + 2 * i, 2); v[j] = bf16_to_f32(h); break;
                default:
                    throw ModelError(fmt::format("{}: vector '{}' has type {}, expected F32, F16 or BF16", f.path(),
                                                 name, ggml_type_name(t.type)));
            }
        }
        float* p = backend.upload_vector(v);
        m->vectors_.push_back(p);
        return p;
    };

    // The experts of a layer: a 3-D tensor, ne = [cols, rows, n_experts], of
    // which this rank packs its slice (split.first_expert, split.n_experts).
    auto experts = [&](const std::string& name, int64_t rows, int64_t cols) {
        const GGUFTensorInfo& t = f.tensor(name);
        const int64_t n = c.moe.n_experts;
        if (t.ne.size() != 3 || t.ne[0] != cols || t.ne[1] != rows || t.ne[2] != n)
            throw ModelError(fmt::format("{}: tensor '{}' has shape [{}], expected [{}, {}, {}]", f.path(), name,
                                         fmt::join(t.ne, ", "), cols, rows, n));
        const uint64_t expert_bytes = t.nbytes / uint64_t(n);
        const uint8_t* first = t.data + uint64_t(split.first_expert) * expert_bytes;
        auto x = packed([&] {
            return backend.pack_experts({name, t.type, rows * split.n_experts, cols, first}, split.n_experts);
        });
        x->first_expert = split.first_expert;
        return x;
    };
    // Megatron's splits (TensorSplit): column-parallel by output features, row-parallel by input features.
    const ShardSpec column_parallel{0, split.rank, split.size}, row_parallel{1, split.rank, split.size};
    const ShardSpec kv_column_parallel{0, split.kv_shard, split.kv_shards};
    // The routed experts split by id (experts above); the shared expert as a dense FFN.
    auto load_moe_layer = [&](const std::string& b, LayerWeights& L) {
        const MoeConfig& moe = c.moe;
        L.router = matrix(b + "ffn_gate_inp.weight", moe.n_experts, c.dim);
        L.exp_gate = experts(b + "ffn_gate_exps.weight", moe.expert_ffn_dim, c.dim);
        L.exp_up = experts(b + "ffn_up_exps.weight", moe.expert_ffn_dim, c.dim);
        L.exp_down = experts(b + "ffn_down_exps.weight", c.dim, moe.expert_ffn_dim);
        if (moe.shared_ffn_dim > 0) {
            L.w_gate = matrix(b + "ffn_gate_shexp.weight", moe.shared_ffn_dim, c.dim, column_parallel);
            L.w_up = matrix(b + "ffn_up_shexp.weight", moe.shared_ffn_dim, c.dim, column_parallel);
            L.w_down = matrix(b + "ffn_down_shexp.weight", c.dim, moe.shared_ffn_dim, row_parallel);
            // [dim] in the file (or convert_hf_to_gguf's [1, dim]): one output feature.
            const std::string name = b + "ffn_gate_inp_shexp.weight";
            const GGUFTensorInfo& g = f.tensor(name);
            if (g.n_elements() != c.dim)
                throw ModelError(fmt::format("{}: tensor '{}' has {} elements, expected {}", f.path(), name,
                                             g.n_elements(), c.dim));
            L.shared_gate = packed([&] { return backend.pack_weight({name, g.type, 1, c.dim, g.data}); });
        }
    };

    if (c.is_moe() && !backend.supports_moe())
        throw ModelError(fmt::format("{}: the {} backend does not run mixture-of-experts models yet", f.path(),
                                     backend.name()));
    ModelWeights& w = m->weights_;
    const int64_t q_dim = int64_t(c.n_heads) * c.head_dim, kv_dim = int64_t(c.n_kv_heads) * c.head_dim;
    // Vocabulary-parallel (ModelWeights): the rows of the vocabulary split like a column-parallel layer's.
    w.token_embd = matrix("token_embd.weight", c.vocab_size, c.dim, column_parallel);
    if (!c.tied_output) w.output = matrix("output.weight", c.vocab_size, c.dim, column_parallel);
    w.vocab_begin = int32_t(int64_t(c.vocab_size) * split.rank / split.size);
    w.output_norm = vector("output_norm.weight", c.dim);
    if (c.has_rope_freqs) {
        w.rope_freqs = vector("rope_freqs.weight", c.rope.n_rot / 2);
        c.rope.freq_factors = w.rope_freqs;
    }
    w.layers.resize(c.n_layers);
    for (int32_t l = 0; l < c.n_layers; ++l) {
        LayerWeights& L = w.layers[l];
        const std::string b = fmt::format("blk.{}.", l);
        L.attn_norm = vector(b + "attn_norm.weight", c.dim);
        L.wq = matrix(b + "attn_q.weight", q_dim, c.dim, column_parallel);
        L.wk = matrix(b + "attn_k.weight", kv_dim, c.dim, kv_column_parallel);
        L.wv = matrix(b + "attn_v.weight", kv_dim, c.dim, kv_column_parallel);
        L.wo = matrix(b + "attn_output.weight", c.dim, q_dim, row_parallel);
        if (c.qkv_bias) {
            L.bq = vector(b + "attn_q.bias", q_dim, column_parallel);
            L.bk = vector(b + "attn_k.bias", kv_dim, kv_column_parallel);
            L.bv = vector(b + "attn_v.bias", kv_dim, kv_column_parallel);
        }
        if (c.qk_norm) {
            L.q_norm = vector(b + "attn_q_norm.weight", c.head_dim);
            L.k_norm = vector(b + "attn_k_norm.weight", c.head_dim);
        }
        if (c.post_norms) L.post_attn_norm = vector(b + "post_attention_norm.weight", c.dim);
        L.ffn_norm = vector(b + "ffn_norm.weight", c.dim);
        if (c.is_moe())
            load_moe_layer(b, L);
        else {
            L.w_gate = matrix(b + "ffn_gate.weight", c.ffn_dim, c.dim, column_parallel);
            L.w_up = matrix(b + "ffn_up.weight", c.ffn_dim, c.dim, column_parallel);
            L.w_down = matrix(b + "ffn_down.weight", c.dim, c.ffn_dim, row_parallel);
        }
        if (c.post_norms) L.post_ffn_norm = vector(b + "post_ffw_norm.weight", c.dim);
    }
    // The config as this rank runs it (copied last: the weights filled in the rope's factors).
    ModelConfig& rc = m->rank_config_ = c;
    rc.n_heads = split.n_heads;
    rc.n_kv_heads = split.n_kv_heads;
    if (c.is_moe())
        rc.moe.shared_ffn_dim = split.ffn_dim;
    else
        rc.ffn_dim = split.ffn_dim;
    return m;
}

}  // namespace minfer
