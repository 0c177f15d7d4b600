#!/usr/bin/env python3
"""Checks `minfer generate` on a device against llama2.c's reference outputs.

All reference cases run in one batch, with a small step budget and a tight KV
pool (chunked prefill, preemption), plus greedy requests with n = 3 whose
samples must equal the n = 1 output (the siblings share the prompt's blocks
and copy the last one on write). Used by scripts/gpu.sh on the GPU machine.

usage: check_generate.py MINFER REFERENCE_JSON [--against-device DEV] [extra minfer flags...]

With --against-device DEV the expected tokens are not llama2.c's but those of
the same run on DEV (for a lossy KV cache, whose rounding changes a few
continuations of the reference: the devices must agree with each other). The
two devices round different fp32 values to bf16, so a continuation may part
where DEV's top two tokens are a near tie: that is accepted (and printed) when
DEV's top-2 log-probability margin there is under NEAR_TIE and the token taken
is DEV's second choice; any other difference fails.
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

NEAR_TIE = 0.05  # nats between DEV's top two tokens where the runs part


def run_generate(minfer, cases, flags, logprobs=None):
    """Every case once with n = 1 and once with n = 3: {id: result}."""
    extra = {} if logprobs is None else {"logprobs": logprobs}
    requests = [{"id": i, "prompt": c["prompt"], "max_tokens": c["steps"] - len(c["prompt_ids"]) + 1,
                 "temperature": 0, **extra} for i, c in enumerate(cases)]
    forked = [{"id": f"n3-{i}", "prompt": c["prompt"], "max_tokens": c["steps"] - len(c["prompt_ids"]) + 1,
               "temperature": 0, "n": 3, **extra} for i, c in enumerate(cases)]
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


def parting(choice, other):
    """None when choice's tokens equal other's; else (position, margin, accepted) where they part."""
    got, want = choice["token_ids"], other["token_ids"]
    if got == want:
        return None
    p = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    if p >= min(len(got), len(want)):
        return p, float("inf"), False  # one stopped where the other went on
    top = sorted(other["logprobs"]["top_logprobs"][p].values(), reverse=True)
    margin = top[0] - top[1] if len(top) > 1 else float("inf")
    second_choice = choice["logprobs"]["tokens"][p] in other["logprobs"]["top_logprobs"][p]
    return p, margin, margin < NEAR_TIE and second_choice


def main():
    minfer, reference, flags = sys.argv[1], sys.argv[2], sys.argv[3:]
    against = None
    if "--against-device" in flags:
        i = flags.index("--against-device")
        against = flags[i + 1]
        del flags[i:i + 2]
    cases = json.loads(Path(reference).read_text())
    results = run_generate(minfer, cases, flags, logprobs=2 if against else None)
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
        other = run_generate(minfer, cases, other_flags, logprobs=2)
        if other is None:
            return 1
        bad = ties = 0
        for i in range(len(cases)):
            want = other[i]["choices"][0]
            for name, choice in [(f"{i}", results[i]["choices"][0])] + [
                    (f"n3-{i}.{c['index']}", c) for c in results[f"n3-{i}"]["choices"]]:
                part = parting(choice, want)
                if part is None:
                    continue
                p, margin, accepted = part
                ties += accepted
                bad += not accepted
                print(f"request {name} parts from {against} at token {p}: {against}'s top-2 margin {margin:.3g} nats"
                      f" ({'a near tie, accepted' if accepted else 'FAIL'})")
        total = 4 * len(cases)
        print(f"generate: {total - bad - ties} of {total} sequences match the same run on {against}, "
              f"{ties} part at a near tie (< {NEAR_TIE} nats), {bad} differ")
        return 1 if bad else 0
    bad = 0
    for i, want in enumerate(expected):
        bad += results[i]["choices"][0]["token_ids"] != want
        bad += any(ch["token_ids"] != want for ch in results[f"n3-{i}"]["choices"])
    print(f"generate: {2 * len(cases) - bad} of {2 * len(cases)} requests match {source}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
