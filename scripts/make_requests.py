#!/usr/bin/env python3
"""Writes a JSONL workload for `minfer generate`: random prompt token ids.

  make_requests.py --count 256 --prompt-len 64:256 --max-tokens 64 --vocab 512 > requests.jsonl
  make_requests.py --count 256 --shared-prefix 400 --prompt-len 16:64 ... (every prompt starts alike)

Lengths are uniform in LO:HI (or exactly N). Token 1 (BOS) starts each prompt.
"""
import argparse
import json
import random


def length(spec, rng):
    lo, _, hi = spec.partition(":")
    return rng.randint(int(lo), int(hi or lo))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=256)
    ap.add_argument("--prompt-len", default="64:256", help="prompt tokens after the shared prefix: N or LO:HI")
    ap.add_argument("--max-tokens", default="64", help="N or LO:HI")
    ap.add_argument("--shared-prefix", type=int, default=0, help="tokens every prompt shares after BOS")
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--ignore-eos", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    prefix = [rng.randrange(3, a.vocab) for _ in range(a.shared_prefix)]
    for i in range(a.count):
        prompt = [1] + prefix + [rng.randrange(3, a.vocab) for _ in range(length(a.prompt_len, rng))]
        req = {"id": i, "prompt_token_ids": prompt, "max_tokens": length(a.max_tokens, rng),
               "temperature": a.temperature, "seed": i}
        if a.ignore_eos:
            req["ignore_eos"] = True
        print(json.dumps(req))


if __name__ == "__main__":
    main()
