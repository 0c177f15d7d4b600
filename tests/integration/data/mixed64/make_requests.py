#!/usr/bin/env python3
"""Writes requests.jsonl: 64 mixed `minfer generate` requests over the bundled model.

Greedy and seeded sampling, n > 1, logprobs with and without echo, stop strings
and ids, penalties, logit bias, min_tokens, priorities and clients, shared
prefixes: every path of the engine's step pipeline. expected.jsonl holds the
results of the engine before the step-pipeline redesign; test_generate.py
checks that they stay byte-identical. Run once; both files are committed.
"""
import json
import random

rng = random.Random(64)
words = ("Once upon a time there was a little girl named Lily who loved to play in the park with her dog "
         "Tom and one day they found a big red ball under a tree and the sun was shining").split()
shared = "Once upon a time, in a big forest, there lived a"
out = []
for i in range(64):
    r = {"id": f"mixed-{i}"}
    if i % 5 == 0:
        r["prompt"] = shared + " " + " ".join(rng.choice(words) for _ in range(rng.randint(1, 6)))
    else:
        r["prompt"] = " ".join(rng.choice(words) for _ in range(rng.randint(1, 40)))
    r["max_tokens"] = rng.randint(1, 80)
    if i % 3 == 0:
        r["temperature"] = 0
    else:
        r["temperature"] = round(rng.uniform(0.3, 1.2), 2)
        r["seed"] = rng.randint(0, 10**6)
        if i % 4 == 1: r["top_p"] = 0.9
        if i % 4 == 2: r["top_k"] = rng.randint(1, 40)
        if i % 7 == 3: r["min_p"] = 0.05
    if i % 6 == 1: r["n"] = rng.randint(2, 3)
    if i % 8 == 2: r["logprobs"] = rng.randint(0, 5)
    if i % 16 == 4: r["logprobs"] = 2; r["echo"] = True
    if i % 9 == 5: r["stop"] = [rng.choice(["Lily", " the", ".", "dog"])]
    if i % 11 == 6: r["stop_token_ids"] = [rng.randint(3, 511)]
    if i % 10 == 7: r["presence_penalty"] = 0.5; r["frequency_penalty"] = 0.3
    if i % 13 == 8: r["repetition_penalty"] = 1.3
    if i % 12 == 9: r["logit_bias"] = {str(rng.randint(3, 511)): 5.0}
    if i % 14 == 10: r["min_tokens"] = min(r["max_tokens"], 5)
    if i % 15 == 11: r["ignore_eos"] = True
    r["priority"] = rng.randint(0, 3)
    r["user"] = f"client-{i % 4}"
    out.append(r)
with open("requests.jsonl", "w") as f:
    for r in out:
        f.write(json.dumps(r) + "\n")
