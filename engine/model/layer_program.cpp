#include "engine/model/layer_program.h"

#include <cmath>

namespace minfer {

LayerProgram LayerProgram::from(const ModelConfig& c) {
    LayerProgram p;
    p.embed_scale = c.embed_scale;
    p.qk_norm = c.qk_norm;
    p.post_norms = c.post_norms;
    p.ffn_act = c.ffn_act;
    p.moe = c.is_moe();
    p.routing = {c.moe.n_experts, c.moe.n_experts_used, c.moe.renormalize};
    return p;
}

void attention_block(const LayerContext& ctx, const LayerWeights& L, int32_t layer, const float* delta) {
    const ModelConfig& c = ctx.config;
    const LayerBuffers& b = ctx.buf;
    Backend& be = ctx.backend;
    const int32_t n = ctx.n;
    const bool sliding = c.is_sliding(layer);
    const AttentionParams attn{c.n_heads, c.n_kv_heads, c.head_dim, c.attn_scale, sliding ? c.sliding_window : 0};
    be.add_rms_norm(b.residual, delta, L.attn_norm, c.norm_eps, n, c.dim, b.normed);
    const Backend::MatmulTarget qkv[] = {{L.wq.get(), L.bq, b.q}, {L.wk.get(), L.bk, b.k}, {L.wv.get(), L.bv, b.v}};
    be.matmul_shared_input(b.normed, qkv, n);
    if (ctx.program.qk_norm) {  // each head normalised on its own: rows of head_dim
        be.add_rms_norm(b.q, nullptr, L.q_norm, c.norm_eps, n * c.n_heads, c.head_dim, b.q);
        be.add_rms_norm(b.k, nullptr, L.k_norm, c.norm_eps, n * c.n_kv_heads, c.head_dim, b.k);
    }
    be.rope_kv_write(b.q, b.k, b.v, attn, sliding ? c.rope_swa : c.rope, ctx.cache, layer);
    be.paged_attention(b.q, attn, ctx.cache, layer, b.attn);
    be.matmul(b.attn, *L.wo, nullptr, n, b.proj);
    if (ctx.comm) ctx.comm->all_reduce_sum(b.proj, size_t(n) * c.dim);
    if (ctx.program.post_norms) be.add_rms_norm(b.proj, nullptr, L.post_attn_norm, c.norm_eps, n, c.dim, b.proj);
}

void dense_ffn_block(const LayerContext& ctx, const LayerWeights& L) {
    const ModelConfig& c = ctx.config;
    const LayerBuffers& b = ctx.buf;
    Backend& be = ctx.backend;
    const int32_t n = ctx.n;
    be.add_rms_norm(b.residual, b.proj, L.ffn_norm, c.norm_eps, n, c.dim, b.normed);
    const Backend::MatmulTarget gate_up[] = {{L.w_gate.get(), nullptr, b.gate}, {L.w_up.get(), nullptr, b.up}};
    be.matmul_shared_input(b.normed, gate_up, n);
    if (ctx.program.ffn_act == FfnActivation::GELU)
        be.geglu(b.gate, b.up, n, c.ffn_dim, b.hidden);
    else
        be.swiglu(b.gate, b.up, n, c.ffn_dim, b.hidden);
    be.matmul(b.hidden, *L.w_down, nullptr, n, b.proj);
    if (ctx.comm) ctx.comm->all_reduce_sum(b.proj, size_t(n) * c.dim);
    if (ctx.program.post_norms) be.add_rms_norm(b.proj, nullptr, L.post_ffn_norm, c.norm_eps, n, c.dim, b.proj);
}

void moe_ffn_block(const LayerContext& ctx, const LayerWeights& L) {
    const ModelConfig& c = ctx.config;
    const LayerBuffers& b = ctx.buf;
    Backend& be = ctx.backend;
    const int32_t n = ctx.n;
    be.add_rms_norm(b.residual, b.proj, L.ffn_norm, c.norm_eps, n, c.dim, b.normed);
    be.matmul(b.normed, *L.router, nullptr, n, b.router_logits);
    be.moe_route(b.router_logits, n, ctx.program.routing, b.expert_ids, b.expert_weights);
    if (ctx.expert_load) ctx.expert_load->count(be, b.expert_ids, int64_t(n) * ctx.program.routing.k);
    be.moe_experts(b.normed, b.expert_ids, b.expert_weights, n, ctx.program.routing.k, *L.exp_gate, *L.exp_up,
                   *L.exp_down, b.proj);
    if (L.shared_gate) {
        const int32_t width = c.moe.shared_ffn_dim;
        const Backend::MatmulTarget gate_up[] = {{L.w_gate.get(), nullptr, b.gate}, {L.w_up.get(), nullptr, b.up},
                                                 {L.shared_gate.get(), nullptr, b.shared_gate}};
        be.matmul_shared_input(b.normed, gate_up, n);
        be.swiglu(b.gate, b.up, n, width, b.hidden);
        be.matmul(b.hidden, *L.w_down, nullptr, n, b.shared_out);
        be.add_sigmoid_gated(b.shared_gate, b.shared_out, n, c.dim, b.proj);
    }
    if (ctx.comm) ctx.comm->all_reduce_sum(b.proj, size_t(n) * c.dim);
}

void ExpertLoad::count(Backend& backend, const int32_t* ids_on_backend, int64_t count) {
    ids.resize(size_t(count));
    backend.download(ids.data(), ids_on_backend, ids.size() * sizeof(int32_t));
    for (const int32_t e : ids) ++pairs[size_t(e / experts_per_rank)];
}

void run_layer_program(const LayerContext& ctx, const ModelWeights& w, int32_t logits_rows, float* last_rows,
                       float* logits) {
    const ModelConfig& c = ctx.config;
    const LayerBuffers& b = ctx.buf;
    Backend& be = ctx.backend;
    const int32_t n = ctx.n;
    be.embedding(*w.token_embd, w.vocab_begin, b.residual);
    if (ctx.comm) ctx.comm->all_reduce_sum(b.residual, size_t(n) * c.dim);  // the rank holding each id adds its row
    if (ctx.program.embed_scale) be.scale(b.residual, int64_t(n) * c.dim, std::sqrt(float(c.dim)));
    const float* delta = nullptr;  // the previous layer's output, added to the residual by the next norm
    for (int32_t l = 0; l < c.n_layers; ++l) {
        attention_block(ctx, w.layers[l], l, delta);
        if (ctx.program.moe)
            moe_ffn_block(ctx, w.layers[l]);
        else
            dense_ffn_block(ctx, w.layers[l]);
        delta = b.proj;
    }
    // Only the rows that want logits go through the final norm and the LM head.
    if (logits_rows == 0) return;
    be.add_rms_norm(b.residual, delta, w.output_norm, c.norm_eps, n, c.dim, b.normed);
    be.gather_logit_rows(b.normed, c.dim, last_rows);
    be.matmul(last_rows, w.lm_head(), nullptr, logits_rows, logits);
}

}  // namespace minfer
