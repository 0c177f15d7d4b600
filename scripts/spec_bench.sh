#!/usr/bin/env bash
# Speculative decoding's speed on one model: `minfer bench latency` with and
# without a proposer in one run (the same greedy requests, checked equal), as
# JSON lines: n-gram lookup at k = 2, 4, 8 and batch 1, then k = 4 at the
# batches of SPEC_BENCH_BATCHES; with DRAFT, a draft model at k = 2, 4, 6 and
# batch 1 and at k = 4 and each batch.
#
#   scripts/spec_bench.sh MINFER MODEL [DRAFT] [extra bench latency flags...]
#
# SPEC_BENCH_BATCHES (default "8 32 64"), SPEC_BENCH_OUTPUT (128),
# SPEC_BENCH_PROMPT (scripts/data/spec-prompt-code.txt).
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
MINFER=$1 MODEL=$2 DRAFT=${3:-}  # an empty DRAFT: n-gram only
shift $(( $# >= 3 ? 3 : 2 ))
BATCHES=${SPEC_BENCH_BATCHES:-8 32 64}
OUTPUT=${SPEC_BENCH_OUTPUT:-128}
PROMPT=${SPEC_BENCH_PROMPT:-$(dirname "$0")/data/spec-prompt-code.txt}
bench() {  # flags...
  "$MINFER" bench latency "$MODEL" --output-len "$OUTPUT" --prompt-file "$PROMPT" --repetitions 3 --json "$@"
}
for k in 2 4 8; do bench --num-speculative-tokens "$k" "$@"; done
for b in $BATCHES; do bench --num-speculative-tokens 4 --batch "$b" "$@"; done
if [ -n "$DRAFT" ]; then
  for k in 2 4 6; do bench --speculative-model "$DRAFT" --num-speculative-tokens "$k" "$@"; done
  for b in $BATCHES; do bench --speculative-model "$DRAFT" --num-speculative-tokens 4 --batch "$b" "$@"; done
fi
