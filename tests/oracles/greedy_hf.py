#!/usr/bin/env python3
"""Greedy continuation of a prompt (token ids) by Hugging Face transformers
loading a GGUF (dequantized to float32): the oracle for the real-model tests.

    python tests/oracles/greedy_hf.py MODEL.gguf --ids 2,818,5279 -n 16

Prints JSON: the generated ids, and each step's margin between the top two
logits (a small margin is a near tie that a quantized engine may break the
other way). Also the ids the model's own HF tokenizer gives for --text.
"""
import argparse
import json
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--ids", required=True, help="comma-separated prompt ids")
    ap.add_argument("-n", type=int, default=16)
    ap.add_argument("--text", help="also tokenize this text with the GGUF's tokenizer")
    a = ap.parse_args()
    path = os.path.abspath(a.model)
    d, f = os.path.dirname(path), os.path.basename(path)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32).eval()
    ids = [int(x) for x in a.ids.split(",")]
    out, margins = [], []
    with torch.no_grad():
        for _ in range(a.n):
            logits = model(torch.tensor([ids + out])).logits[0, -1]
            top = torch.topk(logits, 2)
            margins.append(float(top.values[0] - top.values[1]))
            out.append(int(top.indices[0]))
    result = {"generated_ids": out, "margins": margins}
    if a.text is not None:
        tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
        result["hf_text_ids"] = tok(a.text, add_special_tokens=True)["input_ids"]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
