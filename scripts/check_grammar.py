#!/usr/bin/env python3
"""Grammar-constrained generation on a device: `minfer generate` with 64
constrained samples a request (JSON Schema, GBNF, regex, choice) at temperature
1 and above, so the sampler draws from wide distributions and only the mask
keeps the text valid. Every sample that ends with "stop" must validate (a
small validator of the schema below, written out: the GPU machine has no
jsonschema package); the others were cut by max_tokens.
Used by scripts/gpu.sh on the GPU machine (masks uploaded and applied in the
CUDA sampler); runs on the CPU as well.

usage: check_grammar.py MINFER [extra minfer generate flags, e.g. --device cuda --synthetic gemma3-270m:bf16]
"""
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

PET = {"type": "object", "properties": {"animal": {"enum": ["cat", "dog"]}, "legs": {"type": "integer"},
                                        "name": {"type": "string", "maxLength": 5}},
       "required": ["animal", "legs"], "additionalProperties": False}
DATE = ('root ::= ("19" | "20") [0-9]{2} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [12] [0-9] | "3" [01])')
DATE_RE = r"(19|20)\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"


def pet_ok(text):
    v = json.loads(text)
    return (isinstance(v, dict) and set(v) <= {"animal", "legs", "name"} and {"animal", "legs"} <= set(v)
            and v["animal"] in ("cat", "dog") and isinstance(v["legs"], int) and not isinstance(v["legs"], bool)
            and (isinstance(v.get("name", ""), str) and len(v.get("name", "")) <= 5))


CASES = [  # (request fields, checks a finished text)
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "pet", "schema": PET}}, "max_tokens": 60},
     pet_ok),
    ({"guided_grammar": DATE, "max_tokens": 20}, lambda t: re.fullmatch(DATE_RE, t) is not None),
    ({"guided_regex": r"[a-z]{2,6}( [a-z]{2,6}){0,3}\.", "max_tokens": 40},
     lambda t: re.fullmatch(r"[a-z]{2,6}( [a-z]{2,6}){0,3}\.", t) is not None),
    ({"guided_choice": ["cat", "dog", "a bird"], "max_tokens": 10}, lambda t: t in ("cat", "dog", "a bird")),
]


def main():
    minfer, extra = sys.argv[1], sys.argv[2:]
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = Path(tmp) / "in.jsonl", Path(tmp) / "out.jsonl"
        lines = [{"id": i, "prompt": "Answer:", "n": 64, "temperature": 1.0 + 0.5 * (i % 2), "seed": i, **fields}
                 for i, (fields, _) in enumerate(CASES)]
        inp.write_text("".join(json.dumps(line) + "\n" for line in lines))
        subprocess.run([minfer, "generate", *extra, "--input", str(inp), "--output", str(out)], check=True)
        results = [json.loads(line) for line in out.read_text().splitlines()]
    failed = 0
    for (fields, ok), res in zip(CASES, results):
        kind = next(k for k in fields if k != "max_tokens")
        stopped = [c["text"] for c in res["choices"] if c["finish_reason"] == "stop"]
        bad = []
        for text in stopped:
            try:
                good = ok(text)
            except ValueError:
                good = False
            if not good:
                bad.append(text)
        print(f"{kind}: {len(res['choices'])} samples, {len(stopped)} ended, {len(set(stopped))} distinct, "
              f"{len(bad)} invalid{': ' + repr(bad[:3]) if bad else ''}")
        failed += bool(bad) or not stopped
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
