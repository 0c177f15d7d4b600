#!/usr/bin/env python3
"""Checks that CUDA graphs change nothing: `minfer generate` on the GPU with
recorded decode steps and with --enforce-eager must give identical tokens.

The requests mix greedy and seeded sampling (temperature, top-k, top-p, min-p,
penalties, n = 2) over prompts of many lengths, in a small KV pool so that
steps preempt and batches change size from step to step (many row buckets).
The graph run must have captured graphs and the eager run none. Used by
scripts/gpu.sh on the GPU machine.

usage: check_graphs.py MINFER [extra minfer flags...]
"""
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

WORDS = "once upon a time there was a little girl named lily who liked to play in the park with her dog".split()


def requests():
    out = []
    for i in range(40):
        prompt = " ".join(WORDS[(i * 7) % len(WORDS):] + WORDS[:(i * 3) % 11])[: 20 + 9 * i]
        r = {"id": i, "prompt": prompt, "max_tokens": 16 + (i * 13) % 90}
        kind = i % 5
        if kind == 0:
            r["temperature"] = 0
        elif kind == 1:
            r.update(temperature=0.8, top_k=40, seed=i)
        elif kind == 2:
            r.update(temperature=1.0, top_p=0.9, min_p=0.02, seed=1000 + i, n=2)
        elif kind == 3:
            r.update(temperature=0, repetition_penalty=1.3, presence_penalty=0.5, frequency_penalty=0.3)
        else:
            r.update(temperature=0.7, seed=7 * i, logit_bias={"5": 2.0, "100": -50})
        out.append(r)
    return out


def run(minfer, src, dst, flags):
    proc = subprocess.run([minfer, "generate", "--input", str(src), "--output", str(dst),
                           "--max-num-batched-tokens", "96", "--num-kv-blocks", "48", "--block-size", "16",
                           "--device", "cuda", *flags], capture_output=True, text=True)
    print(proc.stderr.strip())
    if proc.returncode != 0:
        sys.exit(f"check_graphs: minfer generate {' '.join(flags)} failed")
    graphs = re.search(r"(\d+) CUDA graphs captured", proc.stderr)
    results = {r["id"]: [c["token_ids"] for c in r["choices"]] for r in map(json.loads, dst.read_text().splitlines())}
    return results, int(graphs.group(1)) if graphs else -1


def main():
    minfer, flags = sys.argv[1], sys.argv[2:]
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in.jsonl"
        src.write_text("".join(json.dumps(r) + "\n" for r in requests()))
        graphed, n_graphs = run(minfer, src, Path(tmp) / "graphs.jsonl", flags)
        eager, n_eager = run(minfer, src, Path(tmp) / "eager.jsonl", [*flags, "--enforce-eager"])
    differ = [i for i in graphed if graphed[i] != eager.get(i)]
    tokens = sum(len(t) for choices in graphed.values() for t in choices)
    print(f"graphs: {n_graphs} captured, eager: {n_eager}; {len(graphed) - len(differ)} of {len(graphed)} requests "
          f"({tokens} tokens) identical")
    ok = not differ and n_graphs > 0 and n_eager == 0 and len(graphed) == len(requests())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
