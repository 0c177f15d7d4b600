#!/usr/bin/env bash
# The serving rows of issue D3: `minfer bench serve` against `minfer serve`, random
# prompts of 512 tokens asking for 128 (--ignore-eos):
#   - all at once (rate inf) with at most 128 in flight, 1000 prompts: throughput,
#     TTFT and TPOT percentiles;
#   - at 2, 8 and 32 requests/s (a minute of arrivals each, 1000 at most): goodput at
#     MLPerf's interactive limits for 8B models (TTFT <= 500 ms, TPOT <= 30 ms).
# Each run's vLLM-style result JSON and --plot SVG go to OUTDIR, with the GPU's idle
# time between engine steps during the run (serve-NAME.device.json, from the server's
# /metrics); the server's log too.
#
#   scripts/serve_bench.sh MINFER MODEL OUTDIR [extra minfer serve flags...]
#
# SERVE_BENCH_SCALE=0.01 scales every prompt count down, and SERVE_BENCH_INPUT /
# SERVE_BENCH_OUTPUT change the lengths (a quick check on the CPU's small model).
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
MINFER=$1 MODEL=$2 OUT=$3
shift 3
SCALE=${SERVE_BENCH_SCALE:-1}
PORT=${SERVE_BENCH_PORT:-8123}
mkdir -p "$OUT"

count() { python3 -c "import sys; print(max(4, round(float(sys.argv[1]) * float(sys.argv[2]))))" "$1" "$SCALE"; }

"$MINFER" serve "$MODEL" --port "$PORT" --max-num-seqs 256 "$@" >"$OUT/serve-server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null || true' EXIT
python3 "$(dirname "$0")/wait_for_server.py" "$PORT" "$SERVER"

# The server's counters: engine steps, and the GPU's idle time between them.
counters() {
  python3 - "$PORT" <<'PY'
import re, sys, urllib.request
text = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=10).read().decode()
def value(name):
    m = re.search(rf"^minfer:{name}\{{[^}}]*\}} (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0
print(value("engine_steps_total"), value("device_idle_seconds_total"))
PY
}

bench() {  # NAME then bench serve flags
  local name=$1
  shift
  echo "--- serve $name"
  local before after
  before=$(counters)
  run_bench "$name" "$@"
  after=$(counters)
  # How much of the run the GPU waited on the host: idle time per step.
  python3 - "$before" "$after" "$OUT/serve-$name.device.json" <<'PY'
import json, sys
(s0, i0), (s1, i1) = (map(float, a.split()) for a in sys.argv[1:3])
steps = s1 - s0
result = {"steps": steps, "device_idle_seconds": i1 - i0,
          "device_idle_us_per_step": (i1 - i0) / steps * 1e6 if steps else 0.0}
open(sys.argv[3], "w").write(json.dumps(result) + "\n")
print(f"engine steps {steps:.0f}, device idle {result['device_idle_us_per_step']:.1f} us per step")
PY
}

run_bench() {  # NAME then bench serve flags
  local name=$1
  shift
  "$MINFER" bench serve --base-url "http://127.0.0.1:$PORT" --tokenizer "$MODEL" \
    --random-input-len "${SERVE_BENCH_INPUT:-512}" --random-output-len "${SERVE_BENCH_OUTPUT:-128}" --ignore-eos \
    --goodput ttft:500,tpot:30 --disable-progress --result-json "$OUT/serve-$name.json" \
    --plot "$OUT/serve-$name.svg" "$@"
}
# A seed per run: one server serves them all, and prompts repeated from an earlier run
# would be found in its prefix cache.
bench inf --num-prompts "$(count 1000)" --request-rate inf --max-concurrency 128 --seed 1
bench rate2 --num-prompts "$(count 120)" --request-rate 2 --seed 2
bench rate8 --num-prompts "$(count 480)" --request-rate 8 --seed 3
bench rate32 --num-prompts "$(count 1000)" --request-rate 32 --seed 4
