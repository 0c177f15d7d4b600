#!/usr/bin/env python3
"""Oracle for Mixtral GGUFs (general.architecture = "llama" with llama.expert_count > 0):
Hugging Face transformers' MixtralForCausalLM, built by hand from the GGUF (dequantized), runs a
prompt given as token ids, in float64 by default.

    python tests/oracles/mixtral_hf.py MODEL.gguf --ids 1,300,42 -n 8 [--dtype float64|float32]

Prints the same JSON as moe_hf.py:
  generated_ids         the N greedy continuation ids
  margins               each greedy step's top-1 minus top-2 logit (a small one is a near tie)
  token_logprobs        for every position i of the final sequence (prompt + generated) but the
                        last, log_softmax(logits[i])[seq[i+1]]: the log-prob of the next token
  last_prompt_logprobs  the whole log_softmax row at the last prompt position (vocab floats)
  config                the sizes and switches the model ran with; config_overrides: always {}
                        here (there is no transformers GGUF config to override: see below)
No tokenizer is built or needed (ids in, ids out). Needs torch, transformers, gguf, numpy
(written against transformers 5.25, gguf 0.19). float64 needs 8 bytes per parameter of memory;
--dtype float32 halves that. The float64 pieces (RMSNorm, router, rope, eager attention softmax)
and read_gguf are moe_hf.py's, imported from the same directory.

What this script decides, and why:

* Loading. transformers' GGUF loader maps general.architecture "llama" to LlamaForCausalLM and
  knows nothing of the expert tensors, so it cannot load a Mixtral GGUF. The MixtralConfig is
  therefore built from the GGUF metadata (gguf.GGUFReader) and the tensor shapes: hidden_size
  (embedding_length), num_hidden_layers (block_count), num_attention_heads, num_key_value_heads,
  head_dim (attention.key_length, else hidden/heads), vocab_size (token_embd rows),
  rms_norm_eps (attention.layer_norm_rms_epsilon, the float32 the file holds, widened),
  rope_theta (rope.freq_base, default 10000), intermediate_size (the expert tensors' n_ff,
  checked against expert_feed_forward_length / feed_forward_length), num_local_experts
  (expert_count), num_experts_per_tok (expert_used_count), max_position_embeddings
  (context_length), tie_word_embeddings (no output.weight: llama.cpp then uses token_embd),
  sliding_window None (llama.cpp's llama architecture has no sliding window). The model is made
  with MixtralForCausalLM._from_config (no random init) and every parameter is copied from the
  file; a parameter left unset, or a tensor in the file left unused, is an error. Refused
  rather than approximated: rope scaling, partial rotary (rope.dimension_count != head_dim),
  value_length != key_length, per-layer head counts, attention/output biases, a layer without
  experts (dense FFN), expert_weights_scale != 1, shared experts, the legacy per-expert tensor
  layout (blk.N.ffn_gate.E.weight), and a non-softmax expert gating function.

* q/k permutation. llama.cpp's convert_hf_to_gguf.py (LlamaModel.permute) stores attn_q / attn_k
  of llama-architecture models permuted for its NORM-style rope (rotating adjacent pairs
  (2i, 2i+1)): W.reshape(n_head, 2, rows/n_head/2, cols).swapaxes(1, 2), with n_head = head_count
  for q and head_count_kv for k. HF's Mixtral rotates halves (rotate_half: (i, i + d/2)), so
  the inverse is applied: W.reshape(n_head, rows/n_head/2, 2, cols).swapaxes(1, 2) -- exactly
  transformers' own LlamaTensorProcessor._reverse_permute_weights (modeling_gguf_pytorch_utils.py).
  With it, HF's rotate_half rope on the un-permuted q/k equals llama.cpp's NORM rope on the
  stored ones (head by head, up to a fixed reordering of each head's dims that q.k ignores).

* Expert layout (transformers 5.x MixtralExperts): experts.gate_up_proj [n_expert, 2*n_ff, n_embd]
  (gate rows first, then up: forward does linear(x, gate_up_proj[e]).chunk(2)) and
  experts.down_proj [n_expert, n_embd, n_ff]; GGUF ffn_gate_exps / ffn_up_exps are numpy
  [n_expert, n_ff, n_embd] each and are concatenated on axis 1, ffn_down_exps
  [n_expert, n_embd, n_ff] is down_proj as is, ffn_gate_inp [n_expert, n_embd] is
  mlp.gate.weight. An older transformers with per-expert w1/w2/w3 modules is refused.

* Routing as llama.cpp (build_moe_ffn for the llama architecture: softmax gating, norm_w true)
  and MixtralTopKRouter both do it: softmax over ALL experts' router logits, top-k of those
  probabilities, divided by their sum. Stock MixtralTopKRouter does that softmax in float32; in
  float64 moe_hf's float64 router (norm_topk_prob set true) replaces it.

* float64 is float64 throughout, as in moe_hf.py: RMSNorm, router softmax, rope cos/sin
  (frequencies 1/theta**(2i/d) in float64) and eager attention's softmax are replaced by
  float64 versions; attention is "eager" and the experts the per-expert loop ("eager"). In
  --dtype float32 the stock transformers code runs unchanged (sdpa attention, default experts).
"""
import argparse
import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")      # an offline oracle: never reach for the hub
os.environ.setdefault("USE_HUB_KERNELS", "0")     # and no hub kernels

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np
import torch
from gguf import GGUFReader
from gguf.quants import dequantize
from moe_hf import greedy_and_logprobs, patch_float64, read_gguf  # noqa: E402  (float64 pieces shared with moe_hf.py)
from transformers import MixtralConfig, MixtralForCausalLM

ARCH = "llama"


def fail(msg):
    sys.exit(f"mixtral_hf.py: {msg}")


def build_config(meta, shapes):
    arch = meta.get("general.architecture")
    if arch != ARCH:
        fail(f"architecture {arch!r} is not {ARCH!r} (llama.cpp writes Mixtral as llama)")
    k = lambda name, default=None: meta.get(f"{arch}.{name}", default)

    def one(name, default=None):
        v = k(name, default)
        if isinstance(v, list):
            if len(set(v)) != 1:
                fail(f"per-layer {name} {v} is not supported")
            v = v[0]
        return v

    n_expert = int(k("expert_count", 0) or 0)
    n_used = int(k("expert_used_count", 0) or 0)
    if n_expert <= 0 or n_used <= 0:
        fail("llama.expert_count / expert_used_count missing or 0: a dense llama, not Mixtral")
    if n_used > n_expert:
        fail("expert_used_count > expert_count")
    n_embd, n_layer = int(k("embedding_length")), int(k("block_count"))
    n_head = int(one("attention.head_count"))
    n_head_kv = int(one("attention.head_count_kv", n_head))
    head_dim = int(k("attention.key_length", n_embd // n_head))
    if int(k("attention.value_length", head_dim)) != head_dim:
        fail("attention.value_length != key_length")
    if n_head % n_head_kv:
        fail("head_count is not a multiple of head_count_kv")
    if head_dim % 2:
        fail("odd head_dim")
    if int(k("rope.dimension_count", head_dim)) != head_dim:
        fail("partial rotary (rope.dimension_count != head_dim) is not supported")
    if str(k("rope.scaling.type", "none")) not in ("none", "") or float(k("rope.scaling.factor", 1.0) or 1.0) != 1.0:
        fail("rope scaling is not supported")
    if any(key.startswith(f"{arch}.rope.scaling.") and key not in (f"{arch}.rope.scaling.type", f"{arch}.rope.scaling.factor")
           for key in meta):
        fail("rope scaling is not supported")
    if float(k("expert_weights_scale", 1.0) or 1.0) != 1.0:
        fail("expert_weights_scale != 1 is not supported")
    if int(k("expert_shared_count", 0) or 0) != 0:
        fail("shared experts are not Mixtral")
    if int(k("expert_gating_func", 1) or 1) != 1:  # llama.cpp: 1 = softmax
        fail("expert_gating_func other than softmax is not supported")
    if k("attention.scale") is not None:
        fail("attention.scale is not supported")
    if k("attention.sliding_window") is not None:
        fail("sliding window is not supported")

    if "token_embd.weight" not in shapes:
        fail("no token_embd.weight")
    n_vocab, emb_dim = shapes["token_embd.weight"]
    if emb_dim != n_embd:
        fail("token_embd width != embedding_length")
    if k("vocab_size") is not None and int(k("vocab_size")) != n_vocab:
        fail("vocab_size disagrees with token_embd rows")
    if any(".ffn_gate." in n and n.split(".")[3].isdigit() for n in shapes):
        fail("legacy per-expert tensors (blk.N.ffn_gate.E.weight) are not supported")
    if any(n.endswith(".bias") for n in shapes):
        fail("bias tensors are not supported (Mixtral has none)")
    if f"blk.0.ffn_gate_exps.weight" not in shapes:
        fail("no blk.0.ffn_gate_exps.weight")
    n_e, n_ff, e_embd = shapes["blk.0.ffn_gate_exps.weight"]
    if (n_e, e_embd) != (n_expert, n_embd):
        fail(f"ffn_gate_exps shape {shapes['blk.0.ffn_gate_exps.weight']} disagrees with the metadata")
    ff_meta = k("expert_feed_forward_length", k("feed_forward_length"))
    if isinstance(ff_meta, list):
        ff_meta = ff_meta[0] if len(set(ff_meta)) == 1 else fail(f"per-layer feed_forward_length {ff_meta}")
    if ff_meta is not None and int(ff_meta) != n_ff:
        fail(f"expert n_ff {n_ff} disagrees with the metadata's {ff_meta}")

    q_rows, kv_rows = n_head * head_dim, n_head_kv * head_dim
    expect = {"token_embd.weight": (n_vocab, n_embd), "output_norm.weight": (n_embd,)}
    if "output.weight" in shapes:
        expect["output.weight"] = (n_vocab, n_embd)
    for i in range(n_layer):
        b = f"blk.{i}."
        expect.update({
            b + "attn_norm.weight": (n_embd,),
            b + "attn_q.weight": (q_rows, n_embd),
            b + "attn_k.weight": (kv_rows, n_embd),
            b + "attn_v.weight": (kv_rows, n_embd),
            b + "attn_output.weight": (n_embd, q_rows),
            b + "ffn_norm.weight": (n_embd,),
            b + "ffn_gate_inp.weight": (n_expert, n_embd),
            b + "ffn_gate_exps.weight": (n_expert, n_ff, n_embd),
            b + "ffn_up_exps.weight": (n_expert, n_ff, n_embd),
            b + "ffn_down_exps.weight": (n_expert, n_embd, n_ff),
        })
    for name, shape in expect.items():
        if name not in shapes:
            fail(f"missing tensor {name} (a layer without experts, i.e. a dense FFN, is not supported)")
        if shapes[name] != shape:
            fail(f"{name} has shape {shapes[name]}, expected {shape}")
    extra = sorted(set(shapes) - set(expect) - {"rope_freqs.weight"})
    if extra:
        fail(f"tensors this script does not know: {extra[:8]}")
    if "rope_freqs.weight" in shapes:
        fail("rope_freqs.weight (rope frequency factors) is not supported")

    theta = float(k("rope.freq_base", 10000.0))
    used = {
        "hidden_size": n_embd,
        "num_hidden_layers": n_layer,
        "num_attention_heads": n_head,
        "num_key_value_heads": n_head_kv,
        "head_dim": head_dim,
        "vocab_size": n_vocab,
        "rms_norm_eps": float(k("attention.layer_norm_rms_epsilon")),
        "intermediate_size": n_ff,
        "num_local_experts": n_expert,
        "num_experts_per_tok": n_used,
        "norm_topk_prob": True,
        "tie_word_embeddings": "output.weight" not in shapes,
        "sliding_window": None,
        "hidden_act": "silu",
        "max_position_embeddings": int(k("context_length", 4096)),
    }
    cfg = MixtralConfig(
        vocab_size=n_vocab, hidden_size=n_embd, intermediate_size=n_ff, num_hidden_layers=n_layer,
        num_attention_heads=n_head, num_key_value_heads=n_head_kv, head_dim=head_dim,
        hidden_act="silu", max_position_embeddings=used["max_position_embeddings"],
        rms_norm_eps=used["rms_norm_eps"], tie_word_embeddings=used["tie_word_embeddings"],
        rope_parameters={"rope_type": "default", "rope_theta": theta}, sliding_window=None,
        num_experts_per_tok=n_used, num_local_experts=n_expert, router_jitter_noise=0.0,
        attention_dropout=0.0, output_router_logits=False, use_cache=False,
    )
    # check that the config says what was asked (a transformers that renames a field would not)
    for name in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
                 "vocab_size", "rms_norm_eps", "intermediate_size", "num_local_experts", "num_experts_per_tok",
                 "sliding_window", "max_position_embeddings"):
        if getattr(cfg, name, None) != used[name]:
            fail(f"MixtralConfig.{name} is {getattr(cfg, name, None)!r}, wanted {used[name]!r}")
    if (cfg.rope_parameters or {}).get("rope_theta") != theta or cfg.rope_parameters.get("rope_type") != "default":
        fail(f"MixtralConfig.rope_parameters is {cfg.rope_parameters}")
    used.update(rope_theta=theta, architecture=arch, hf_model_type="mixtral")
    return cfg, used


def unpermute_qk(w, n_head):
    """Inverse of convert_hf_to_gguf.py LlamaModel.permute (= transformers'
    _reverse_permute_weights): GGUF's NORM-rope row order back to HF's rotate_half order."""
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def load_tensors(reader):
    """{name: float32/float64 numpy array in numpy order}, dequantizing any type."""
    out = {}
    for t in reader.tensors:
        shape = tuple(int(x) for x in reversed(t.shape.tolist()))
        a = dequantize(t.data, t.tensor_type)
        out[t.name] = np.asarray(a).reshape(shape)
    return out


def build_model(path, cfg, used, dtype, float64):
    kw = {"dtype": dtype}
    if float64:
        kw["attn_implementation"] = "eager"
        if hasattr(type(cfg), "_experts_implementation") or hasattr(cfg, "_experts_implementation"):
            kw["experts_implementation"] = "eager"
    try:
        from transformers.initialization import no_init_weights
    except ImportError:  # an older transformers
        from transformers.modeling_utils import no_init_weights
    with no_init_weights():
        model = MixtralForCausalLM._from_config(cfg, **kw)
    ex = model.model.layers[0].mlp.experts
    if not (hasattr(ex, "gate_up_proj") and hasattr(ex, "down_proj")):
        fail("this transformers' MixtralExperts has no fused gate_up_proj/down_proj (per-expert w1/w2/w3?); "
             "written against transformers 5.x")
    if tuple(ex.gate_up_proj.shape) != (used["num_local_experts"], 2 * used["intermediate_size"], used["hidden_size"]):
        fail(f"unexpected experts.gate_up_proj shape {tuple(ex.gate_up_proj.shape)}")
    if getattr(ex, "is_transposed", False) or not getattr(ex, "is_concatenated", True):
        fail("MixtralExperts is transposed or interleaved in this transformers")

    reader = GGUFReader(path)
    t = load_tensors(reader)
    n_head, n_head_kv = used["num_attention_heads"], used["num_key_value_heads"]
    sd = {"model.embed_tokens.weight": t["token_embd.weight"], "model.norm.weight": t["output_norm.weight"],
          "lm_head.weight": t.get("output.weight", t["token_embd.weight"])}
    for i in range(used["num_hidden_layers"]):
        b, p = f"blk.{i}.", f"model.layers.{i}."
        sd[p + "input_layernorm.weight"] = t[b + "attn_norm.weight"]
        sd[p + "self_attn.q_proj.weight"] = unpermute_qk(t[b + "attn_q.weight"], n_head)
        sd[p + "self_attn.k_proj.weight"] = unpermute_qk(t[b + "attn_k.weight"], n_head_kv)
        sd[p + "self_attn.v_proj.weight"] = t[b + "attn_v.weight"]
        sd[p + "self_attn.o_proj.weight"] = t[b + "attn_output.weight"]
        sd[p + "post_attention_layernorm.weight"] = t[b + "ffn_norm.weight"]
        sd[p + "mlp.gate.weight"] = t[b + "ffn_gate_inp.weight"]
        sd[p + "mlp.experts.gate_up_proj"] = np.concatenate([t[b + "ffn_gate_exps.weight"], t[b + "ffn_up_exps.weight"]], axis=1)
        sd[p + "mlp.experts.down_proj"] = t[b + "ffn_down_exps.weight"]
    del t

    params = dict(model.named_parameters(remove_duplicate=False))
    missing = sorted(set(params) - set(sd))
    unexpected = sorted(set(sd) - set(params))
    if missing or unexpected:
        fail(f"the weights do not match the model: missing {missing[:8]}, unexpected {unexpected[:8]}")
    tied = params["lm_head.weight"] is params["model.embed_tokens.weight"] or \
        params["lm_head.weight"].data_ptr() == params["model.embed_tokens.weight"].data_ptr()
    if tied and not used["tie_word_embeddings"]:
        fail("transformers tied lm_head to embed_tokens but the file has its own output.weight")
    with torch.no_grad():
        for name, p in params.items():
            a = sd[name]
            if tuple(p.shape) != a.shape:
                fail(f"{name}: model {tuple(p.shape)} vs file {a.shape}")
            p.copy_(torch.from_numpy(np.array(a, dtype=np.float64)).to(dtype))  # a copy: the mmap is read-only
    # buffers that are not parameters (rope inv_freq) were computed in __init__, not initialised
    return model.eval()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--ids", required=True, help="comma-separated prompt ids")
    ap.add_argument("-n", type=int, default=8, help="greedy steps")
    ap.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    t0 = time.time()
    path = os.path.abspath(a.model)
    ids = [int(x) for x in a.ids.split(",") if x.strip()]
    if not ids:
        fail("empty --ids")

    meta, shapes = read_gguf(path)
    cfg, used = build_config(meta, shapes)
    if max(ids) >= used["vocab_size"] or min(ids) < 0:
        fail("an id is outside the vocabulary")

    f64 = a.dtype == "float64"
    dtype = torch.float64 if f64 else torch.float32
    model = build_model(path, cfg, used, dtype, f64).to(a.device)
    if f64:
        for m in model.modules():
            if type(m).__name__.endswith("TopKRouter"):
                m.norm_topk_prob = True  # moe_hf's float64 router reads it; Mixtral always renormalises
        patch_float64(model, used["rope_theta"], used["head_dim"])
    t_load = time.time() - t0

    result = greedy_and_logprobs(model, ids, a.n, a.device)
    result = {"architecture": used["architecture"], "dtype": a.dtype, **result, "config": used,
              "config_overrides": {},
              "seconds": {"load": round(t_load, 3), "total": round(time.time() - t0, 3)}}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
