#!/usr/bin/env python3
"""Checks `minfer generate` on a device against llama2.c's reference outputs.

All reference cases run in one batch, with a small step budget and a tight KV
pool (chunked prefill, preemption), plus greedy requests with n = 3 whose
samples must equal the n = 1 output (the siblings share the prompt's blocks
and copy the last one on write). Used by scripts/gpu.sh on the GPU machine.

usage: check_generate.py MINFER REFERENCE_JSON [extra minfer flags...]
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path


def main():
    minfer, reference, flags = sys.argv[1], sys.argv[2], sys.argv[3:]
    cases = json.loads(Path(reference).read_text())
    requests = [{"id": i, "prompt": c["prompt"], "max_tokens": c["steps"] - len(c["prompt_ids"]) + 1,
                 "temperature": 0} for i, c in enumerate(cases)]
    forked = [{"id": f"n3-{i}", "prompt": c["prompt"], "max_tokens": c["steps"] - len(c["prompt_ids"]) + 1,
               "temperature": 0, "n": 3} for i, c in enumerate(cases)]
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.jsonl", Path(tmp) / "out.jsonl"
        src.write_text("".join(json.dumps(r) + "\n" for r in requests + forked))
        proc = subprocess.run([minfer, "generate", "models/stories260K.gguf", "--input", str(src), "--output",
                               str(dst), "--max-num-batched-tokens", "64", "--num-kv-blocks", "64",
                               "--block-size", "16", *flags], capture_output=True, text=True)
        print(proc.stderr.strip())
        if proc.returncode != 0:
            return 1
        results = {r["id"]: r for r in map(json.loads, dst.read_text().splitlines())}
    bad = 0
    for i, c in enumerate(cases):
        got = results[i]["choices"][0]["token_ids"]
        bad += got != c["generated_ids"]
        bad += any(ch["token_ids"] != c["generated_ids"] for ch in results[f"n3-{i}"]["choices"])
    print(f"generate: {2 * len(cases) - bad} of {2 * len(cases)} requests match the llama2.c reference")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
