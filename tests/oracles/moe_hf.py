#!/usr/bin/env python3
"""Oracle for Mixture-of-Experts GGUFs (architectures qwen2moe, qwen3moe):
Hugging Face transformers loads the GGUF (dequantized) and runs a prompt given
as token ids, in float64 by default.

    python tests/oracles/moe_hf.py MODEL.gguf --ids 2,818,5279 -n 8 [--dtype float64|float32]

Prints JSON:
  generated_ids         the N greedy continuation ids
  margins               each greedy step's top-1 minus top-2 logit (a small one is a near tie)
  token_logprobs        for every position i of the final sequence (prompt + generated) but the
                        last, log_softmax(logits[i])[seq[i+1]]: the log-prob of the next token
  last_prompt_logprobs  the whole log_softmax row at the last prompt position (vocab floats)
  config                the sizes and switches the model ran with; config_overrides: those that
                        the file said and transformers' own GGUF config had wrong or missing
No tokenizer is built or needed (ids in, ids out). Needs torch, transformers, gguf, numpy
(a transformers with GGUF qwen2moe/qwen3moe support; written against 5.25).
float64 needs 8 bytes per parameter of memory; --dtype float32 halves that.

What this script decides, and why:

* Config. transformers' GGUF config mapping for qwen2moe/qwen3moe reads neither
  `{arch}.expert_feed_forward_length` nor `{arch}.expert_shared_feed_forward_length`, so
  moe_intermediate_size and shared_expert_intermediate_size stay at the released models' defaults
  (768 / 1408 / 5632) and loading any other file fails or is wrong. The config is therefore
  taken from AutoConfig.from_pretrained(dir, gguf_file=file) and then every size is checked
  against the GGUF metadata (read with gguf.GGUFReader) and the tensor shapes, and set from the
  file where it differs: hidden_size, num_hidden_layers, num_attention_heads,
  num_key_value_heads, head_dim (attention.key_length, else hidden/heads), vocab_size
  (token_embd rows), rms_norm_eps, rope theta, intermediate_size, moe_intermediate_size,
  shared_expert_intermediate_size (qwen2moe), num_experts, num_experts_per_tok, q/k/v biases
  (qwen2moe: present or not), tied output. Anything this script cannot reproduce exactly
  (rope scaling, partial rotary, expert weight scale, qwen3moe attention biases, per-layer
  head counts that differ) is refused with an error rather than approximated. Every model
  parameter must come from the file: a missing one is an error.

* norm_topk_prob follows llama.cpp, not the GGUF: llama.cpp hard-codes it per architecture
  (src/models/qwen3moe.cpp passes norm_w=true to build_moe_ffn, src/models/qwen2moe.cpp passes
  false), so qwen3moe renormalises the k selected weights to sum 1 and qwen2moe does not
  (the weights are the full softmax's probabilities). --norm-topk-prob true|false overrides.

* Routing as llama.cpp and transformers both do it: softmax over ALL experts' router logits,
  then top-k of those probabilities, then (qwen3moe) divide by their sum. qwen2moe adds a
  shared expert (SwiGLU, size expert_shared_feed_forward_length) scaled by
  sigmoid(ffn_gate_inp_shexp . x), on every token.

* float64 is float64 throughout. Stock transformers computes some pieces in float32 whatever
  the model dtype: RMSNorm (casts to float32), the router softmax (dtype=torch.float), the
  rope cos/sin (inv_freq and angles in float32) and eager attention's softmax
  (dtype=torch.float32). In --dtype float64 this script replaces those four with float64
  versions (same maths; the rope frequencies as 1/theta**(2i/d) in float64) and runs eager
  attention and experts_implementation="eager" (the per-expert loop; the kwarg exists in
  transformers >= 5 -- an older transformers lacks it, and then it is left out). In --dtype
  float32 the stock transformers code runs unchanged.

* Layout after transformers' GGUF conversion (its Qwen2MoeTensorProcessor, used for both
  architectures): ffn_gate_exps and ffn_up_exps, numpy [n_expert, n_ff_exp, n_embd] each, are
  fused into experts.gate_up_proj [n_expert, 2*n_ff_exp, n_embd], gate rows first, up second;
  ffn_down_exps [n_expert, n_embd, n_ff_exp] is experts.down_proj as is; ffn_gate_inp
  [n_expert, n_embd] is the router weight; ffn_gate_inp_shexp [n_embd] becomes
  shared_expert_gate.weight [1, n_embd] (a file with it 2-D, [1, n_embd] as convert_hf_to_gguf.py
  writes it, is flattened first: stock transformers would make it [1, 1, n_embd] and fail). q/k are not un-permuted (qwen rope is NEOX style,
  rotate_half, and llama.cpp's converter does not permute qwen's q/k).
"""
import argparse
import json
import os
import sys
import time
import types

os.environ.setdefault("HF_HUB_OFFLINE", "1")      # an offline oracle: never reach for the hub
os.environ.setdefault("USE_HUB_KERNELS", "0")     # and no hub kernels

import numpy as np
import torch
from gguf import GGUFReader
from transformers import AutoConfig, AutoModelForCausalLM

ARCHS = ("qwen2moe", "qwen3moe")
NORM_TOPK_PROB = {"qwen3moe": True, "qwen2moe": False}  # llama.cpp's norm_w per architecture


def read_gguf(path):
    """(metadata dict of scalars/lists, {tensor name: numpy-order shape})."""
    r = GGUFReader(path)
    meta = {}
    for key, field in r.fields.items():
        if key.startswith("tokenizer.ggml.") and key.split(".")[-1] in ("tokens", "merges", "scores", "token_type"):
            continue  # big arrays, not needed
        try:
            meta[key] = field.contents()
        except Exception:  # an older gguf without contents()
            meta[key] = None
    shapes = {t.name: tuple(int(x) for x in reversed(t.shape.tolist())) for t in r.tensors}
    return meta, shapes


def build_config(d, f, meta, shapes, norm_topk_prob):
    arch = meta["general.architecture"]
    if arch not in ARCHS:
        sys.exit(f"moe_hf.py: architecture {arch!r} is not one of {ARCHS}")
    k = lambda name, default=None: meta.get(f"{arch}.{name}", default)

    def fail(msg):
        sys.exit(f"moe_hf.py: {msg}")

    n_embd, n_layer, n_head = int(k("embedding_length")), int(k("block_count")), int(k("attention.head_count"))
    n_head_kv = k("attention.head_count_kv", n_head)
    if isinstance(n_head_kv, list):
        if len(set(n_head_kv)) != 1:
            fail(f"per-layer head_count_kv {n_head_kv} is not supported")
        n_head_kv = n_head_kv[0]
    n_head_kv = int(n_head_kv)
    head_dim = int(k("attention.key_length", n_embd // n_head))
    if int(k("attention.value_length", head_dim)) != head_dim:
        fail("attention.value_length != key_length")
    if int(k("rope.dimension_count", head_dim)) != head_dim:
        fail("partial rotary (rope.dimension_count != head_dim) is not supported")
    if str(k("rope.scaling.type", "none")) not in ("none", "") or float(k("rope.scaling.factor", 1.0) or 1.0) != 1.0:
        fail("rope scaling is not supported")
    if float(k("expert_weights_scale", 1.0) or 1.0) != 1.0:
        fail("expert_weights_scale != 1 is not supported")
    if k("expert_shared_count", 1 if arch == "qwen2moe" else 0) not in ((1,) if arch == "qwen2moe" else (0,)):
        fail("unexpected expert_shared_count")

    n_vocab, emb_dim = shapes["token_embd.weight"]
    if emb_dim != n_embd:
        fail("token_embd width != embedding_length")
    n_expert, n_used = int(k("expert_count")), int(k("expert_used_count"))
    n_e, n_ff_exp, e_embd = shapes["blk.0.ffn_gate_exps.weight"]
    if (n_e, e_embd) != (n_expert, n_embd):
        fail(f"ffn_gate_exps shape {shapes['blk.0.ffn_gate_exps.weight']} disagrees with the metadata")
    if k("expert_feed_forward_length") is not None and int(k("expert_feed_forward_length")) != n_ff_exp:
        fail("expert_feed_forward_length disagrees with ffn_gate_exps")
    if shapes["blk.0.ffn_down_exps.weight"] != (n_expert, n_embd, n_ff_exp):
        fail("ffn_down_exps shape is not [n_expert, n_embd, n_ff_exp]")
    has_bias = "blk.0.attn_q.bias" in shapes

    want = {
        "hidden_size": n_embd,
        "num_hidden_layers": n_layer,
        "num_attention_heads": n_head,
        "num_key_value_heads": n_head_kv,
        "head_dim": head_dim,
        "vocab_size": n_vocab,
        "rms_norm_eps": float(k("attention.layer_norm_rms_epsilon")),
        "moe_intermediate_size": n_ff_exp,
        "num_experts": n_expert,
        "num_experts_per_tok": n_used,
        "norm_topk_prob": NORM_TOPK_PROB[arch] if norm_topk_prob is None else norm_topk_prob,
        "tie_word_embeddings": "output.weight" not in shapes,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "use_sliding_window": False,
        "hidden_act": "silu",
    }
    if k("feed_forward_length") is not None:
        want["intermediate_size"] = int(k("feed_forward_length"))  # unused: every layer is MoE
    if k("context_length") is not None:
        want["max_position_embeddings"] = int(k("context_length"))
    if arch == "qwen2moe":
        if "blk.0.ffn_gate_inp_shexp.weight" not in shapes:
            fail("qwen2moe without a shared expert (ffn_*_shexp) is not what llama.cpp loads")
        n_ff_sh = shapes["blk.0.ffn_gate_shexp.weight"][0]
        if k("expert_shared_feed_forward_length") is not None and int(k("expert_shared_feed_forward_length")) != n_ff_sh:
            fail("expert_shared_feed_forward_length disagrees with ffn_gate_shexp")
        want["shared_expert_intermediate_size"] = n_ff_sh
        want["qkv_bias"] = has_bias
    else:
        if has_bias:
            fail("qwen3moe with attention biases is not supported")
        want["attention_bias"] = False

    cfg = AutoConfig.from_pretrained(d, gguf_file=f)
    overrides = {}
    for name, value in want.items():
        have = getattr(cfg, name, None)
        if have != value:
            overrides[name] = {"transformers": have, "file": value}
            setattr(cfg, name, value)
    theta = float(k("rope.freq_base", 10000.0))
    rp = dict(getattr(cfg, "rope_parameters", None) or {})
    if rp.get("rope_type", "default") != "default" or rp.get("rope_theta") != theta:
        overrides["rope_parameters"] = {"transformers": rp or None, "file": {"rope_type": "default", "rope_theta": theta}}
        cfg.rope_parameters = {"rope_type": "default", "rope_theta": theta}
    if hasattr(cfg, "rope_theta") and getattr(cfg, "rope_theta", None) not in (None, theta):
        cfg.rope_theta = theta  # older transformers keep it here
    if arch == "qwen2moe" and getattr(cfg, "sliding_window", None):
        cfg.sliding_window = 0
    used = dict(want, rope_theta=theta, architecture=arch)
    return cfg, used, overrides


# ---- float64 replacements for the pieces stock transformers computes in float32 ----

def _rmsnorm64(self, x):
    dt = torch.promote_types(x.dtype, torch.float32)
    h = x.to(dt)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
    return self.weight * h.to(x.dtype)


def _router64(self, hidden_states):
    hidden_states = hidden_states.reshape(-1, self.hidden_dim)
    logits = torch.nn.functional.linear(hidden_states, self.weight)
    probs = torch.softmax(logits, dim=-1)                      # over all experts, in the model dtype
    top_value, top_index = torch.topk(probs, self.top_k, dim=-1)
    if self.norm_topk_prob:
        top_value = top_value / top_value.sum(dim=-1, keepdim=True)
    return logits, top_value.to(logits.dtype), top_index


def _rope64(self, x, position_ids):
    freqs = position_ids[..., None].to(torch.float64) * self._inv_freq64.to(x.device)
    emb = torch.cat((freqs, freqs), dim=-1)
    return (emb.cos() * self.attention_scaling).to(x.dtype), (emb.sin() * self.attention_scaling).to(x.dtype)


def _make_eager64(repeat_kv):
    def eager64(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
        k = repeat_kv(key, module.num_key_value_groups)
        v = repeat_kv(value, module.num_key_value_groups)
        w = torch.matmul(query, k.transpose(2, 3)) * scaling
        if attention_mask is not None:
            w = w + attention_mask
        w = torch.softmax(w, dim=-1)                            # in the model dtype
        out = torch.matmul(w, v).transpose(1, 2).contiguous()
        return out, w
    return eager64


def patch_float64(model, theta, head_dim):
    seen = {}
    for m in model.modules():
        name = type(m).__name__
        if name.endswith("RMSNorm"):
            m.forward = types.MethodType(_rmsnorm64, m)
        elif name.endswith("TopKRouter"):
            m.forward = types.MethodType(_router64, m)
        elif name.endswith("RotaryEmbedding"):
            m._inv_freq64 = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
            m.forward = types.MethodType(_rope64, m)
        seen[name] = seen.get(name, 0) + 1
        mod = sys.modules.get(type(m).__module__)
        if name.endswith("Attention") and hasattr(mod, "eager_attention_forward") and hasattr(mod, "repeat_kv"):
            if not getattr(mod, "_moe_hf_f64", False):
                mod.eager_attention_forward = _make_eager64(mod.repeat_kv)
                mod._moe_hf_f64 = True
    for suffix in ("RMSNorm", "TopKRouter", "RotaryEmbedding", "Attention"):
        if not any(n.endswith(suffix) for n in seen):
            sys.exit(f"moe_hf.py: found no *{suffix} module to make float64; transformers changed?")


def accept_2d_shexp_gate():
    """llama.cpp's convert_hf_to_gguf.py writes ffn_gate_inp_shexp as [1, n_embd] (2-D) while
    llama-quantize's output has it 1-D; transformers' Qwen2MoeTensorProcessor adds a leading axis
    unconditionally, so a 2-D one would load as [1, 1, n_embd] and fail. Flatten it first."""
    try:
        from transformers import modeling_gguf_pytorch_utils as g
    except ImportError:
        return
    proc = getattr(g, "Qwen2MoeTensorProcessor", None)
    if proc is None or getattr(proc, "_moe_hf_flat_shexp", False):
        return
    orig = proc.process

    def process(self, weights, name, **kwargs):
        if "ffn_gate_inp_shexp" in name and getattr(weights, "ndim", 1) == 2:
            weights = weights.reshape(-1)
        return orig(self, weights, name, **kwargs)

    proc.process = process
    proc._moe_hf_flat_shexp = True


def greedy_and_logprobs(model, ids, n, device):
    """n greedy steps from the prompt `ids`, then the log-probs: the JSON's prompt_ids,
    generated_ids, margins, token_logprobs, last_prompt_position and last_prompt_logprobs."""
    out, margins, logits = [], [], None
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([ids + out], device=device), use_cache=False).logits[0]
            top = torch.topk(logits[-1], 2)
            margins.append(float(top.values[0] - top.values[1]))
            out.append(int(top.indices[0]))
        if logits is None:  # n == 0: the prompt's own pass
            logits = model(torch.tensor([ids], device=device), use_cache=False).logits[0]
    # `logits` is the pass over seq[:-1] (or the prompt when n == 0): rows for every position
    # that predicts a next token, and the last prompt position's row.
    seq = ids + out
    logp = torch.log_softmax(logits.to(torch.float64), dim=-1).cpu()
    return {
        "prompt_ids": ids,
        "generated_ids": out,
        "margins": margins,
        "token_logprobs": [float(logp[i, seq[i + 1]]) for i in range(len(seq) - 1)],
        "last_prompt_position": len(ids) - 1,
        "last_prompt_logprobs": logp[len(ids) - 1].tolist(),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--ids", required=True, help="comma-separated prompt ids")
    ap.add_argument("-n", type=int, default=8, help="greedy steps")
    ap.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    ap.add_argument("--norm-topk-prob", choices=("true", "false"), help="override llama.cpp's per-arch choice")
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    t0 = time.time()
    path = os.path.abspath(a.model)
    # gguf_file is given as the absolute path: transformers tries os.path.isfile(gguf_file) against
    # the current directory before joining it to the model directory, so a bare file name would
    # silently load a same-named GGUF from the cwd for the weights (the config from the right one).
    d, f = os.path.dirname(path), path
    ids = [int(x) for x in a.ids.split(",")]
    if not ids:
        sys.exit("moe_hf.py: empty --ids")

    meta, shapes = read_gguf(path)
    ntp = None if a.norm_topk_prob is None else a.norm_topk_prob == "true"
    cfg, used, overrides = build_config(d, f, meta, shapes, ntp)
    if max(ids) >= used["vocab_size"] or min(ids) < 0:
        sys.exit("moe_hf.py: an id is outside the vocabulary")

    dtype = torch.float64 if a.dtype == "float64" else torch.float32
    kw = {"config": cfg, "dtype": dtype, "output_loading_info": True}
    if a.dtype == "float64":
        kw["attn_implementation"] = "eager"
        if hasattr(type(cfg), "_experts_implementation"):  # transformers >= 5
            kw["experts_implementation"] = "eager"
    accept_2d_shexp_gate()
    model, info = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, **kw)
    bad = {key: v for key, v in info.items() if key in ("missing_keys", "unexpected_keys", "mismatched_keys") and v}
    if bad:
        sys.exit(f"moe_hf.py: the weights did not load cleanly: {bad}")
    model = model.to(a.device).eval()
    if a.dtype == "float64":
        patch_float64(model, used["rope_theta"], used["head_dim"])
    t_load = time.time() - t0

    result = greedy_and_logprobs(model, ids, a.n, a.device)
    result = {"architecture": used["architecture"], "dtype": a.dtype, **result, "config": used,
              "config_overrides": overrides,
              "seconds": {"load": round(t_load, 3), "total": round(time.time() - t0, 3)}}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
