// The per-architecture layer program: what one transformer layer runs, as
// two steps over the step's rows, the attention block and the FFN block.
// The architecture's choices (ModelConfig's flags from the registry in
// model.cpp) are held in LayerProgram; the FFN block is the dense gated FFN
// or, in a mixture-of-experts model, the routed experts (moe_ffn_block).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "engine/model/model.h"

namespace minfer {

// The runner's activation buffers, [n rows x width] each (model_runner.cpp sizes them).
struct LayerBuffers {
    float* residual = nullptr;  // [dim]: the residual stream
    float* normed = nullptr;    // [dim]: the current block's normalised input
    float* q = nullptr;         // [n_heads * head_dim]
    float* k = nullptr;         // [n_kv_heads * head_dim]
    float* v = nullptr;
    float* attn = nullptr;      // [n_heads * head_dim]: attention's output
    float* proj = nullptr;      // [dim]: a block's output, added to the residual by the next norm
    float* gate = nullptr;      // [ffn_dim]
    float* up = nullptr;
    float* hidden = nullptr;
    // A mixture-of-experts FFN's (null in a dense model):
    float* router_logits = nullptr;   // [n_experts]
    int32_t* expert_ids = nullptr;    // [k]: the experts each row runs
    float* expert_weights = nullptr;  // [k]
    float* shared_gate = nullptr;     // [1]: the shared expert's gate logit
    float* shared_out = nullptr;      // [dim]: the shared expert's output
};

// What differs between the architectures inside a layer (llama, qwen2, qwen3, gemma3).
struct LayerProgram {
    bool embed_scale = false;  // scale the embeddings by sqrt(dim) (gemma)
    bool qk_norm = false;      // RMSNorm over each head of q and k before rope (qwen3, gemma3)
    bool post_norms = false;   // RMSNorm on each block's output before the residual add (gemma3)
    FfnActivation ffn_act = FfnActivation::SiLU;  // the gated FFN's activation
    bool moe = false;          // the FFN is a mixture of experts (moe_ffn_block)
    MoeRouting routing;        // its routing

    static LayerProgram from(const ModelConfig& c);
};

// Expert parallelism's load balance: the (row, expert) pairs routed to each
// rank's experts, counted from the routing (which every rank computes alike).
struct ExpertLoad {
    int32_t experts_per_rank = 1;
    std::vector<int64_t> pairs;  // [ranks]: since the runner last cleared it
    std::vector<int32_t> ids;    // the routing, copied to the host
    // Adds a layer's routing of `count` pairs (ids in the backend's memory).
    void count(Backend& backend, const int32_t* ids_on_backend, int64_t count);
};

// One layer's context: the model's shape (this rank's part of it), the
// program, the backend and buffers.
struct LayerContext {
    const ModelConfig& config;
    const LayerProgram& program;
    Backend& backend;
    const LayerBuffers& buf;
    KVCache& cache;
    int32_t n;  // the step's rows
    // Tensor parallelism: sums the row-parallel layers' partial outputs over
    // the ranks (null in a world of one).
    Communicator* comm = nullptr;
    // Expert parallelism: where the MoE layers count their routing (null: not counted).
    ExpertLoad* expert_load = nullptr;
};

// residual += delta; normed = norm(residual); q/k/v projections, (qk norm),
// rope + KV write, paged attention, the output projection (summed over the
// ranks) (+ post norm) into proj.
void attention_block(const LayerContext& ctx, const LayerWeights& L, int32_t layer, const float* delta);
// residual += proj; normed = norm(residual); gate/up, the activation, down
// (summed over the ranks) (+ post norm) into proj. The dense FFN: the step a
// MoE FFN would replace.
void dense_ffn_block(const LayerContext& ctx, const LayerWeights& L);

// residual += proj; normed = norm(residual); the router's logits, each row's
// top-k experts and weights, the experts' weighted sum into proj, and (qwen2moe)
// the shared expert's output times sigmoid(its gate) added to it. Split over
// ranks, each holds some of the experts (and a part of the shared expert):
// every rank already has every row, so the routing is computed alike on all,
// each runs its experts' pairs, and one all-reduce sums the partial outputs.
void moe_ffn_block(const LayerContext& ctx, const LayerWeights& L);

// The whole stack: embeddings, every layer's two blocks, and (for logits_rows
// > 0) the final norm, the logits rows' gather and the LM head into `logits`.
void run_layer_program(const LayerContext& ctx, const ModelWeights& w, int32_t logits_rows, float* last_rows,
                       float* logits);

}  // namespace minfer
