#!/usr/bin/env bash
# Writes the data of the book's batching-stepper figure: the bundled model
# serves book/figures/data/trace-requests.jsonl on the CPU, once for each of
# three KV pool sizes, and every step's plan (`minfer generate --trace`) is
# saved as JSON together with the requests and the command that made it.
#
#   scripts/book-trace.sh [OUTPUT]    (default book/figures/data/trace-stories260K.json)
#
# The scheduler is deterministic (ignore_eos fixes every output's length), so
# tests/integration/test_book_figures.py re-runs this script and checks that the
# committed file is still what the engine does. MINFER_BIN picks the binary.
set -euo pipefail

cd "$(dirname "$0")/.."
OUTPUT=${1:-book/figures/data/trace-stories260K.json}
MINFER_BIN=${MINFER_BIN:-build/minfer}
REQUESTS=book/figures/data/trace-requests.jsonl

# Four sequences at most and 16 tokens a step (prompts arrive in chunks), with
# blocks of 4 tokens. 12 and 16 blocks are too few for four growing sequences,
# so some get preempted; 32 are enough. The four prompts that start "Once upon
# a time ..." share their first blocks through the prefix cache.
POOLS=(12 16 32)
DEFAULT_POOL=16

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
for blocks in "${POOLS[@]}"; do
  args=(generate models/stories260K.gguf --input "$REQUESTS"
        --num-kv-blocks "$blocks" --block-size 4 --max-num-seqs 4 --max-num-batched-tokens 16
        --max-step-ms 0 --device cpu --threads 1)
  "$MINFER_BIN" "${args[@]}" --output "$WORK/results-$blocks.jsonl" --trace "$WORK/trace-$blocks.jsonl" 2>/dev/null
  # The command as a reader would type it (not the local binary or temp files).
  echo "build/minfer ${args[*]} --output results.jsonl --trace trace.jsonl" >"$WORK/command-$blocks"
done

python3 - "$REQUESTS" "$WORK" "$DEFAULT_POOL" "${POOLS[@]}" >"$OUTPUT" <<'EOF'
import json
import pathlib
import re
import sys

requests_path, work, default_pool, *pools = sys.argv[1:]
work = pathlib.Path(work)


def compact(value):
    return json.dumps(value, separators=(",", ":"))


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


requests = lines(pathlib.Path(requests_path))
# Each request with its prompt's length in tokens (the generated text is left
# out: the file should depend on the scheduler, not on floating-point details).
results = {r["id"]: r for r in lines(work / f"results-{pools[0]}.jsonl")}
for r in requests:
    r["prompt_tokens"] = len(results[r["id"]]["prompt_token_ids"])

# One step per line keeps the file readable and its diffs small.
print("{")
print('"model":"stories260K",')
print(f'"default_run":{pools.index(default_pool)},')
print('"requests":[')
print(",\n".join(compact(r) for r in requests))
print("],")
print('"runs":[')
runs = []
for blocks in pools:
    command = (work / f"command-{blocks}").read_text().strip()
    # The engine settings the figure draws (its token budget bar, its block grid).
    settings = {name.replace("-", "_"): int(value) for name, value in
                re.findall(r"--(max-num-seqs|max-num-batched-tokens|block-size|num-kv-blocks) (\d+)", command)}
    steps = ",\n".join(compact(s) for s in lines(work / f"trace-{blocks}.jsonl"))
    runs.append(f'{{"command":{json.dumps(command)},\n"settings":{compact(settings)},\n"steps":[\n{steps}\n]}}')
print(",\n".join(runs))
print("]")
print("}")
EOF
