#!/usr/bin/env python3
"""Checks `minfer generate` on a device against llama2.c's reference outputs.

All reference cases run in one batch, with a small step budget and a tight KV
pool (chunked prefill, preemption), plus greedy requests with n = 3 whose
samples must equal the n = 1 output (the siblings share the prompt's blocks
and copy the last one on write). Used by scripts/gpu.sh on the GPU machine.

usage: check_generate.py MINFER REFERENCE_JSON [--against-device DEV] [extra minfer flags...]

With --against-device DEV the expected tokens are not llama2.c's but those of
the same run on DEV (for a lossy KV cache, whose rounding changes a few
continuations of the reference: the devices must agree with each other).
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path


def run_generate(minfer, cases, flags):
    """Every case once with n = 1 and once with n = 3: {id: result}."""
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
            return None
        return {r["id"]: r for r in map(json.loads, dst.read_text().splitlines())}


def main():
    minfer, reference, flags = sys.argv[1], sys.argv[2], sys.argv[3:]
    against = None
    if "--against-device" in flags:
        i = flags.index("--against-device")
        against = flags[i + 1]
        del flags[i:i + 2]
    cases = json.loads(Path(reference).read_text())
    results = run_generate(minfer, cases, flags)
    if results is None:
        return 1
    expected = [c["generated_ids"] for c in cases]
    source = "the llama2.c reference"
    if against:
        other_flags = [f for f in flags]
        if "--device" in other_flags:
            other_flags[other_flags.index("--device") + 1] = against
        else:
            other_flags += ["--device", against]
        other = run_generate(minfer, cases, other_flags)
        if other is None:
            return 1
        expected = [other[i]["choices"][0]["token_ids"] for i in range(len(cases))]
        source = f"the same run on {against}"
    bad = 0
    for i, want in enumerate(expected):
        bad += results[i]["choices"][0]["token_ids"] != want
        bad += any(ch["token_ids"] != want for ch in results[f"n3-{i}"]["choices"])
    print(f"generate: {2 * len(cases) - bad} of {2 * len(cases)} requests match {source}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
