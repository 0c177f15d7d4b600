// A model: its configuration (from GGUF metadata), its architecture, and its
// weights packed for one backend.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/gguf.h"

namespace minfer {

struct ModelError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// What differs between the architectures we run (the registry in model.cpp).
struct Architecture {
    const char* name;       // general.architecture
    bool rope_neox;         // NEOX rope pairs (i, i + n/2); NORM pairs (2i, 2i+1)
    bool qkv_bias;          // attn_q/k/v carry a bias
};
const Architecture* find_architecture(const std::string& name);  // nullptr if unsupported
std::vector<std::string> supported_architectures();

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

    // Reads `{arch}.*` keys; throws ModelError naming what is missing or unsupported.
    static ModelConfig from_gguf(const GGUFFile& file);
};

struct LayerWeights {
    float* attn_norm = nullptr;
    std::unique_ptr<PackedWeight> wq, wk, wv, wo;
    float* bq = nullptr;
    float* bk = nullptr;
    float* bv = nullptr;
    float* ffn_norm = nullptr;
    std::unique_ptr<PackedWeight> w_gate, w_up, w_down;
};

struct ModelWeights {
    std::unique_ptr<PackedWeight> token_embd;
    std::unique_ptr<PackedWeight> output;   // null when tied: use token_embd
    float* output_norm = nullptr;
    float* rope_freqs = nullptr;
    std::vector<LayerWeights> layers;

    const PackedWeight& lm_head() const { return output ? *output : *token_embd; }
};

// A loaded model file and its weights on one backend. The file stays mapped
// while the model lives: the CPU backend reads F32 weights from the mapping.
class Model {
public:
    static std::unique_ptr<Model> load(const std::string& path, Backend& backend);
    // The same from an opened (or in-memory, see model_source.h) GGUF, which the model keeps.
    static std::unique_ptr<Model> load(GGUFFile file, Backend& backend);

    const GGUFFile& file() const { return file_; }
    const ModelConfig& config() const { return config_; }
    const ModelWeights& weights() const { return weights_; }
    Backend& backend() const { return backend_; }
    ~Model();

private:
    Model(GGUFFile file, Backend& backend);
    GGUFFile file_;
    Backend& backend_;
    ModelConfig config_;
    ModelWeights weights_;
    std::vector<void*> vectors_;  // backend allocations owned by the model
};

}  // namespace minfer
