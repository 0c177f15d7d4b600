// Synthetic models: random weights in the exact shape of a real model, with a
// working tokenizer, as a GGUF file (`minfer synth`) or an in-memory image
// (`--synthetic PRESET[:DTYPE]`).
//
// They exist to test and benchmark at real sizes without downloading anything.
// Every weight is a pure function of (seed, tensor name, element index), so a
// tensor's f32 values are the same whatever the dtype and the thread count:
// the f16, bf16 and quantized files are conversions of the same numbers.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/gguf/gguf.h"

namespace minfer {

// The shape of a real model. All presets use the llama block (RMSNorm, SwiGLU
// FFN, GQA attention); qwen2 adds q/k/v biases and NEOX rope; qwen3 q/k norms
// and NEOX rope; gemma3 adds q/k norms, post-attention/FFN norms, GeGLU, a wider head and sliding-window layers.
struct SynthPreset {
    const char* name;          // what --preset takes
    const char* arch;          // general.architecture
    const char* real_model;    // the model whose shape this is (for general.name / --list)
    int32_t dim;
    int32_t n_layers;
    int32_t n_heads;
    int32_t n_kv_heads;
    int32_t ffn_dim;
    int32_t vocab_size;
    int32_t context_len;
    bool tied;                 // no output.weight: token_embd is the LM head
    bool qkv_bias;             // blk.N.attn_{q,k,v}.bias
    float rope_base;
    float norm_eps;
    // Llama 3.1-style rope scaling, stored as rope_freqs.weight; factor 0 = none.
    float rope_factor = 0.0f;
    float rope_low_freq_factor = 0.0f;
    float rope_high_freq_factor = 0.0f;
    int32_t rope_original_context = 0;
    int32_t key_length = 0;       // head size when it is not dim / n_heads (gemma3: 256)
    int32_t sliding_window = 0;   // gemma3's sliding layers
    // Mixture of experts (0 experts: a dense FFN): ffn_dim is then the file's
    // feed_forward_length, expert_ffn_dim each expert's width, shared_ffn_dim
    // qwen2moe's shared expert's.
    int32_t n_experts = 0;
    int32_t n_experts_used = 0;
    int32_t expert_ffn_dim = 0;
    int32_t shared_ffn_dim = 0;

    int32_t head_dim() const { return key_length > 0 ? key_length : dim / n_heads; }
    bool is_moe() const { return n_experts > 0; }
    bool is_gemma3() const;
    bool has_qk_norm() const;     // gemma3, qwen3
};

std::span<const SynthPreset> synth_presets();
const SynthPreset* find_synth_preset(std::string_view name);  // nullptr if unknown

// What the weight matrices are stored as. Norms, biases and rope_freqs stay
// F32 in every file, as llama.cpp's converter and quantizer leave them.
enum class SynthDType { F32, F16, BF16, Q8_0, Q4_K_M };
const char* synth_dtype_name(SynthDType d);                  // "f32", "q4_k_m", ...
bool parse_synth_dtype(std::string_view s, SynthDType& out);  // false if unknown
// llama.cpp's LLAMA_FTYPE for general.file_type: 0 F32, 1 F16, 32 BF16, 7 Q8_0, 15 Q4_K_M.
uint32_t synth_llama_ftype(SynthDType d);

// "l134m" or "l134m:q8_0" (dtype defaults to f32). Throws std::invalid_argument
// naming the presets or dtypes when the spec is not one of them.
struct SynthSpec {
    const SynthPreset* preset;
    SynthDType dtype = SynthDType::F32;
};
SynthSpec parse_synth_spec(std::string_view spec);

// One tensor of the file, before any data exists.
enum class SynthRole {
    TokenEmbd, Output, AttnQ, AttnK, AttnV, AttnOutput, FfnGate, FfnUp, FfnDown,  // matrices
    FfnGateExps, FfnUpExps, FfnDownExps,  // 3-D: one matrix an expert
    Router, SharedGate,                   // ffn_gate_inp(_shexp): F32 in every file, as llama.cpp leaves them
    Norm, Bias, RopeFreqs,                // F32 vectors
};
struct SynthTensor {
    std::string name;
    SynthRole role;
    int32_t layer;             // -1 outside the blocks
    GGMLType type;
    std::vector<int64_t> ne;   // GGUF order: ne[0] is the row length

    int64_t cols() const { return ne[0]; }
    int64_t rows() const {  // all of them: a 3-D tensor's experts one after another
        int64_t r = 1;
        for (size_t i = 1; i < ne.size(); ++i) r *= ne[i];
        return r;
    }
    uint64_t nbytes() const { return ggml_row_bytes(type, cols()) * static_cast<uint64_t>(rows()); }
};

// Every tensor of the model, in file order, with the type `dtype` gives it.
std::vector<SynthTensor> synth_plan(const SynthPreset& p, SynthDType dtype);

// The type llama.cpp's `llama-quantize ... Q4_K_M` gives a matrix (exposed for tests).
GGMLType q4_k_m_type(SynthRole role, int32_t layer, int32_t n_layers, int64_t cols, bool tied, int32_t n_experts = 0);

// Llama 3.1's rope frequency divisors for head_dim/2 frequencies (empty when
// the preset has no rope scaling).
std::vector<float> synth_rope_freqs(const SynthPreset& p);

// The f32 values of row `row` of tensor `t` (t.cols() of them): the numbers
// that every dtype's file encodes.
void synth_f32_row(const SynthPreset& p, const SynthTensor& t, uint64_t seed, int64_t row, float* out);

// The SentencePiece-style vocabulary (tokenizer.ggml.model = "llama"):
// <unk> <s> </s>, the 256 byte tokens, then word pieces with U+2581 for a
// leading space, every piece reachable by merges, scores decreasing.
struct SynthVocab {
    std::vector<std::string> tokens;
    std::vector<float> scores;
    std::vector<int32_t> types;   // GGUF token types: 1 normal, 2 unknown, 3 control, 6 byte
};
SynthVocab synth_vocab(int32_t size);

struct SynthOptions {
    uint64_t seed = 0;
    int threads = 0;              // <= 0: one per core
};

// The metadata (and, with tensors = true, the tensor infos) of the model.
GGUFWriter synth_header(const SynthPreset& p, SynthDType dtype, uint64_t seed, bool tensors = true);

// Writes the GGUF file, streaming: memory stays at a few row chunks, not a
// tensor, not the file. Returns the file size. Throws GGUFError on I/O errors.
uint64_t synth_write_file(const SynthPreset& p, SynthDType dtype, const std::string& path, const SynthOptions& opt = {});

// The same bytes as the file, in memory, generated straight in their dtype
// (no f32 copy). Throws std::runtime_error when the image would not fit in
// the memory available (llama3-8b at f32 is 32 GB).
std::vector<uint8_t> synth_image(const SynthPreset& p, SynthDType dtype, const SynthOptions& opt = {});

// The image's size in bytes, computed without generating anything.
uint64_t synth_image_size(const SynthPreset& p, SynthDType dtype);

}  // namespace minfer
