#!/usr/bin/env bash
# minfer beside llama.cpp on the CPU: the same GGUF files, the same threads, one
# run, prefill of P tokens and decode of D (llama-bench's pp/tg; minfer bench
# latency's medians), alternating the two engines file by file.
#
#   scripts/llama-bench.sh LLAMA_CPP MINFER FILE... [-- llama-bench flags]
#
# LLAMA_CPP is a llama.cpp checkout (a clone of github.com/ggml-org/llama.cpp;
# the issue's figures used b4748). Its CPU llama-bench is built once, under
# LLAMA_CPP/build-cpu, with the flags llama.cpp defaults to (GGML_NATIVE: every
# instruction set this CPU has, AMX included where present). Environment:
#   THREADS (2), PROMPT (128), DECODE (64), REPS (5)
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
LLAMA=$(cd "$1" && pwd) MINFER=$2
shift 2
FILES=() EXTRA=()
while [ $# -gt 0 ]; do
  if [ "$1" = -- ]; then shift; EXTRA=("$@"); break; fi
  FILES+=("$1"); shift
done
THREADS=${THREADS:-2} PROMPT=${PROMPT:-128} DECODE=${DECODE:-64} REPS=${REPS:-5}

BENCH=$LLAMA/build-cpu/bin/llama-bench
if [ ! -x "$BENCH" ]; then
  cmake -S "$LLAMA" -B "$LLAMA/build-cpu" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF >/dev/null
  cmake --build "$LLAMA/build-cpu" -j"$(nproc)" --target llama-bench >/dev/null
fi
echo "llama.cpp $(git -C "$LLAMA" describe --tags --always 2>/dev/null || echo '?'), minfer $("$MINFER" --version | head -1)"
echo "$(lscpu | sed -n 's/^Model name: *//p'), $THREADS threads, prefill $PROMPT, decode $DECODE, medians of $REPS"
date -u +%Y-%m-%dT%H:%MZ

printf '%-28s %12s %12s %7s %12s %12s %7s\n' file "prefill mf" "prefill lc" ratio "decode mf" "decode lc" ratio
for f in "${FILES[@]}"; do
  lc=$("$BENCH" -m "$f" -t "$THREADS" -p "$PROMPT" -n "$DECODE" -r "$REPS" -o json "${EXTRA[@]}" 2>/dev/null)
  # As llama-bench: the prompt alone (ppP), and D tokens generated from an empty
  # context (tgD; minfer's prompt is one token).
  pp_mf=$("$MINFER" bench latency "$f" --device cpu --threads "$THREADS" --input-len "$PROMPT" \
         --output-len 2 --repetitions "$REPS" --json 2>/dev/null)
  tg_mf=$("$MINFER" bench latency "$f" --device cpu --threads "$THREADS" --input-len 1 \
         --output-len "$((DECODE + 1))" --repetitions "$REPS" --json 2>/dev/null)
  python3 - "$f" "$lc" "$pp_mf" "$tg_mf" <<'EOF'
import json, os, sys
name, lc = os.path.basename(sys.argv[1]), json.loads(sys.argv[2])
pp_mf, tg_mf = json.loads(sys.argv[3])["prefill_tok_s"], json.loads(sys.argv[4])["decode_tok_s"]
pp = next(r["avg_ts"] for r in lc if r["n_prompt"] > 0)
tg = next(r["avg_ts"] for r in lc if r["n_gen"] > 0)
print(f"{name:28s} {pp_mf:12.1f} {pp:12.1f} {pp_mf / pp:6.2f}x {tg_mf:12.1f} {tg:12.1f} {tg_mf / tg:6.2f}x")
EOF
done
echo "(tok/s; mf = minfer bench latency (medians), lc = llama-bench (means); ratio = minfer / llama.cpp)"
