#!/usr/bin/env bash
# Decode speed under a JSON Schema against free text, through `minfer serve`:
# BATCH prompts of INPUT random tokens at once, each asking for OUTPUT tokens
# (--ignore-eos), first unconstrained, then with a response_format whose schema
# (scripts/data/people.schema.json: an array of at least 100 objects with
# strings, bounded integers, an email and an enum array) cannot be finished in
# OUTPUT tokens, so both runs generate the same number of tokens. Three rounds,
# alternating; prints each run's output tok/s and the medians.
#
#   scripts/grammar_decode_bench.sh MINFER MODEL OUTDIR [extra minfer serve flags...]
#
# GRAMMAR_BENCH_BATCH (default 64), GRAMMAR_BENCH_INPUT (512), GRAMMAR_BENCH_OUTPUT
# (128), GRAMMAR_BENCH_ROUNDS (3), GRAMMAR_BENCH_SCHEMA (the file above).
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
MINFER=$1 MODEL=$2 OUT=$3
shift 3
BATCH=${GRAMMAR_BENCH_BATCH:-64}
INPUT=${GRAMMAR_BENCH_INPUT:-512}
OUTPUT=${GRAMMAR_BENCH_OUTPUT:-128}
ROUNDS=${GRAMMAR_BENCH_ROUNDS:-3}
SCHEMA=${GRAMMAR_BENCH_SCHEMA:-$(dirname "$0")/data/people.schema.json}
PORT=${GRAMMAR_BENCH_PORT:-8124}
mkdir -p "$OUT"

"$MINFER" serve "$MODEL" --port "$PORT" --max-num-seqs "$BATCH" "$@" >"$OUT/grammar-server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null || true' EXIT
python3 "$(dirname "$0")/wait_for_server.py" "$PORT" "$SERVER" || { tail -5 "$OUT/grammar-server.log"; exit 1; }

EXTRA=$(python3 -c 'import json, sys; print(json.dumps({"response_format": {"type": "json_schema",
  "json_schema": {"name": "people", "schema": json.load(open(sys.argv[1]))}}}))' "$SCHEMA")
run() {  # NAME ROUND [bench serve flags]
  local name=$1 round=$2
  shift 2
  "$MINFER" bench serve --base-url "http://127.0.0.1:$PORT" --tokenizer "$MODEL" --disable-progress \
    --num-prompts "$BATCH" --max-concurrency "$BATCH" --random-input-len "$INPUT" --random-output-len "$OUTPUT" \
    --ignore-eos --seed "$round" --result-json "$OUT/grammar-$name-$round.json" "$@" >/dev/null
}
run warmup 0 --extra-body "$EXTRA"  # compiles the schema, fills the mask cache, records the graphs
for r in $(seq "$ROUNDS"); do
  run free "$r"
  run schema "$r" --extra-body "$EXTRA"
done
python3 - "$OUT" "$ROUNDS" "$BATCH" <<'PY'
import json, statistics, sys
out, rounds, batch = sys.argv[1], int(sys.argv[2]), sys.argv[3]
tps = {k: [] for k in ("free", "schema")}
lens = {k: [] for k in tps}
for k in tps:
    for r in range(1, rounds + 1):
        res = json.load(open(f"{out}/grammar-{k}-{r}.json"))
        assert res["failed"] == 0, res["errors"][:3]
        tps[k].append(res["output_throughput"])
        lens[k] += res["output_lens"]
free, schema = statistics.median(tps["free"]), statistics.median(tps["schema"])
for k, v in tps.items():
    print(f"batch {batch} {k:6s} output tok/s: " + "  ".join(f"{x:.1f}" for x in v) +
          f"  (mean output {statistics.mean(lens[k]):.1f} tokens)")
print(f"batch {batch} median: schema {schema:.1f} against free {free:.1f} tok/s ({(schema / free - 1) * 100:+.1f}%)")
PY
