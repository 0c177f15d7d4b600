#!/usr/bin/env python3
"""The oracle for `minfer perplexity`: Hugging Face transformers loads the same
GGUF (dequantized to float32) and scores the same token ids over the same
chunks as llama-perplexity's method (each chunk from an empty cache, its first
token replaced by BOS when the model adds one, the second half scored).

    minfer perplexity MODEL --file TEXT --json > ours.json
    python tests/oracles/perplexity_hf.py MODEL ours.json [--device cuda]

Prints both perplexities and their relative difference; exits 1 when they
differ by more than --tolerance (default 1%). Needs torch, transformers, gguf.
"""
import argparse
import json
import math
import os
import sys

import torch
from transformers import AutoModelForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("ours", help="the output of minfer perplexity --json")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--tolerance", type=float, default=0.01)
    a = ap.parse_args()

    ours = json.load(open(a.ours))
    n_ctx, bos = ours["n_ctx"], ours["bos_id"]
    tokens = ours["tokens"]
    path = os.path.abspath(a.model)
    model = AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path),
                                                 torch_dtype=torch.float32).to(a.device).eval()
    first = n_ctx // 2
    nll_sum, count, chunk_nll = 0.0, 0, []
    with torch.no_grad():
        for c in range(ours["chunks"]):
            chunk = tokens[c * n_ctx:(c + 1) * n_ctx]
            if bos >= 0:
                chunk[0] = bos
            ids = torch.tensor([chunk], device=a.device)
            logits = model(ids).logits[0].double()
            logp = torch.log_softmax(logits[first:n_ctx - 1], dim=-1)
            targets = ids[0, first + 1:n_ctx]
            nll = -logp.gather(1, targets[:, None]).sum().item()
            chunk_nll.append(nll)
            nll_sum += nll
            count += n_ctx - 1 - first
    ppl_ref = math.exp(nll_sum / count)
    rel = abs(ours["ppl"] - ppl_ref) / ppl_ref
    print(json.dumps({"minfer_ppl": ours["ppl"], "hf_ppl": ppl_ref, "rel_diff": rel, "scored_tokens": count,
                      "minfer_chunk_nll": ours["chunk_nll"], "hf_chunk_nll": chunk_nll}))
    sys.exit(0 if rel <= a.tolerance else 1)


if __name__ == "__main__":
    main()
