// A model: its configuration (from GGUF metadata), its architecture, and its
// weights packed for one backend.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/parallel.h"
#include "engine/gguf/gguf.h"

namespace minfer {

struct ModelError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// The activation of the gated feed-forward: silu(gate) * up, or gelu(gate) * up.
enum class FfnActivation { SiLU, GELU };

// What differs between the architectures we run (the registry in model.cpp).
struct Architecture {
    const char* name;       // general.architecture
    bool rope_neox;         // NEOX rope pairs (i, i + n/2); NORM pairs (2i, 2i+1)
    bool qkv_bias;          // attn_q/k/v carry a bias
    bool qk_norm = false;   // RMSNorm over each head of q and k before rope (gemma3, qwen3)
    bool post_norms = false;    // RMSNorm on the attention and FFN outputs before the residual add (gemma2/3)
    bool embed_scale = false;   // token embeddings scaled by sqrt(dim) (gemma)
    FfnActivation ffn_act = FfnActivation::SiLU;
    int32_t swa_pattern = 0;    // every swa_pattern-th layer attends globally, the others slide; 0: none slide
    float rope_base_swa = 0;    // the sliding layers' rope base (gemma3: 10,000)
    // Mixture of experts: whether the FFN must be one (qwen2moe, qwen3moe; a
    // llama file is one when it has experts: Mixtral), whether the k routing
    // weights are divided by their sum, and whether a shared expert with a
    // sigmoid gate runs beside the routed ones (qwen2moe).
    bool moe_required = false;
    bool moe_renormalize = true;
    bool moe_shared_expert = false;
};
const Architecture* find_architecture(const std::string& name);  // nullptr if unsupported
std::vector<std::string> supported_architectures();

// A mixture-of-experts FFN's shape (n_experts == 0: the FFN is dense).
struct MoeConfig {
    int32_t n_experts = 0;       // expert_count
    int32_t n_experts_used = 0;  // expert_used_count: k, the experts each token runs
    int32_t expert_ffn_dim = 0;  // expert_feed_forward_length
    int32_t shared_ffn_dim = 0;  // expert_shared_feed_forward_length (qwen2moe); 0: no shared expert
    bool renormalize = true;     // the k weights divided by their sum
};

struct ModelConfig {
    std::string arch;
    int32_t n_layers = 0;
    int32_t dim = 0;            // embedding length
    int32_t n_heads = 0;
    int32_t n_kv_heads = 0;
    int32_t head_dim = 0;
    int32_t ffn_dim = 0;
    int32_t vocab_size = 0;
    int32_t context_len = 0;
    float norm_eps = 1e-5f;
    RopeParams rope;            // freq_factors filled in by the weights
    bool tied_output = false;   // no output.weight: the embedding is the LM head
    bool has_rope_freqs = false;
    bool rope_neox = false;
    bool qkv_bias = false;
    bool qk_norm = false;
    bool post_norms = false;
    bool embed_scale = false;
    FfnActivation ffn_act = FfnActivation::SiLU;
    float attn_scale = 0;       // multiplies q·k; 1/sqrt(head_dim) unless the architecture says otherwise
    int32_t sliding_window = 0; // tokens a sliding layer sees (itself included); 0: no sliding layers
    int32_t swa_pattern = 0;
    RopeParams rope_swa;        // the sliding layers' rope
    MoeConfig moe;

    bool is_moe() const { return moe.n_experts > 0; }
    // The width of the dense FFN the layers run: the FFN itself, or a MoE
    // model's shared expert (0 when it has none).
    int32_t dense_ffn_dim() const { return is_moe() ? moe.shared_ffn_dim : ffn_dim; }

    bool is_sliding(int32_t layer) const {
        return sliding_window > 0 && swa_pattern > 0 && (layer + 1) % swa_pattern != 0;
    }

    // Reads `{arch}.*` keys; throws ModelError naming what is missing or unsupported.
    static ModelConfig from_gguf(const GGUFFile& file);
};

// What a mixture-of-experts file's experts weigh (all zero in a dense file):
// their tensors (*_exps) hold n_experts matrices each, of which a token runs
// n_experts_used.
struct ExpertWeights {
    int32_t n_experts = 0;
    int32_t n_experts_used = 0;
    uint64_t params = 0;  // in the *_exps tensors
    uint64_t bytes = 0;
    // The share of the experts' bytes that a step of `tokens` rows reads when
    // each token picks its k of E experts uniformly: 1 - (1 - k/E)^tokens.
    double fraction_read(int32_t tokens) const;
};
ExpertWeights expert_weights(const GGUFFile& file);

struct LayerWeights {
    float* attn_norm = nullptr;
    std::unique_ptr<PackedWeight> wq, wk, wv, wo;
    float* bq = nullptr;
    float* bk = nullptr;
    float* bv = nullptr;
    float* q_norm = nullptr;            // qk_norm: [head_dim]
    float* k_norm = nullptr;
    float* post_attn_norm = nullptr;    // post_norms: [dim]
    float* ffn_norm = nullptr;
    // The dense FFN; in a MoE model with a shared expert, that expert.
    std::unique_ptr<PackedWeight> w_gate, w_up, w_down;
    float* post_ffn_norm = nullptr;
    // A mixture-of-experts FFN: the router (ffn_gate_inp, [n_experts, dim]),
    // the experts (ffn_{gate,up,down}_exps), and the shared expert's gate
    // (ffn_gate_inp_shexp, [1, dim]).
    std::unique_ptr<PackedWeight> router;
    std::unique_ptr<PackedExperts> exp_gate, exp_up, exp_down;
    std::unique_ptr<PackedWeight> shared_gate;
};

struct ModelWeights {
    // Under tensor parallelism both hold this rank's rows of the vocabulary,
    // ids vocab_begin .. vocab_begin + rows - 1 (vocabulary-parallel: each
    // rank's embedding gives zeros for the others' ids, the LM head its logits).
    std::unique_ptr<PackedWeight> token_embd;
    std::unique_ptr<PackedWeight> output;  // null when tied: use token_embd
    int32_t vocab_begin = 0;
    float* output_norm = nullptr;
    float* rope_freqs = nullptr;
    std::vector<LayerWeights> layers;

    const PackedWeight& lm_head() const { return output ? *output : *token_embd; }
};

// How a model is cut over a tensor-parallel group of `size` ranks (Megatron's
// splits): q/k/v and gate/up by output features (column-parallel), the
// attention output and down by input features (row-parallel, an all-reduce
// after each), the LM head by vocabulary. KV heads are split too, or each
// rank keeps the one KV head its query heads read when there are fewer KV
// heads than ranks. Throws ModelError when a dimension does not divide.
struct TensorSplit {
    int32_t rank = 0, size = 1;
    int32_t n_heads = 0, n_kv_heads = 0;  // this rank's
    int32_t kv_shard = 0, kv_shards = 1;  // which KV heads: shard kv_shard of kv_shards
    int32_t ffn_dim = 0;                  // this rank's part of the (dense or shared-expert) FFN
    // A mixture-of-experts model's routed experts on this rank (expert
    // parallelism: ids first_expert .. first_expert + n_experts - 1).
    int32_t first_expert = 0, n_experts = 0;
    static TensorSplit of(const ModelConfig& c, int32_t rank, int32_t size, bool expert_parallel,
                          const std::string& path);
};

// A loaded model file and its weights on one backend. The file stays mapped
// while the model lives: the CPU backend reads F32 weights from the mapping.
class Model {
public:
    // group: this rank's shard of a tensor-parallel model (null: all of it).
    static std::unique_ptr<Model> load(const std::string& path, Backend& backend, const Group* group = nullptr);
    // The same from an opened (or in-memory, see model_source.h) GGUF, which the model keeps.
    static std::unique_ptr<Model> load(GGUFFile file, Backend& backend, const Group* group = nullptr);

    const GGUFFile& file() const { return file_; }
    // The model as its file describes it.
    const ModelConfig& config() const { return config_; }
    // The part this rank runs: config() with its heads and FFN width (the
    // same as config() without a group).
    const ModelConfig& rank_config() const { return rank_config_; }
    const Group* group() const { return group_; }
    const ModelWeights& weights() const { return weights_; }
    Backend& backend() const { return backend_; }
    ~Model();

private:
    Model(GGUFFile file, Backend& backend);
    GGUFFile file_;
    Backend& backend_;
    const Group* group_ = nullptr;
    ModelConfig config_;
    ModelConfig rank_config_;
    ModelWeights weights_;
    std::vector<void*> vectors_;  // backend allocations owned by the model
};

}  // namespace minfer
