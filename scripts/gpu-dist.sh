#!/usr/bin/env bash
# The multi-GPU run (GPU-N): tensor and expert parallelism over NCCL, launched
# with mpirun. Runs from the repository root on a machine of N GPUs, after
# `bash scripts/gpu.sh --build` there: the binaries must link the machine's own
# MPI, whose mpirun starts them (a prebuilt binary's Debian Open MPI would not
# match the machine's launcher).
#
#   bash scripts/gpu-dist.sh [MINFER]        (default build-gpu/minfer)
#
# DEVICE=cpu runs the same steps on the CPU (over MPI), small, to check the
# script here. RANKS (default: every GPU, at most 8) bounds the degrees.
#   1. correctness: `generate -tp 2` on the bundled model against one rank
#      (greedy tokens; bf16 near-ties are counted, not hidden), expert
#      parallelism over 2 on qwen3moe-tiny against one rank;
#   2. the collectives' bus bandwidth through our Communicator (NCCL) over 2..RANKS;
#   3. scaling: bench latency of llama3-8b bf16 at batch 1 and 64 over 1, 2, 4, 8
#      ranks, llama3-70b's shape (first LAYERS_70B=16 layers) over 2, 4, 8, and
#      qwen3moe-30b-a3b (first 8 layers) with expert parallelism over 2, 4, 8.
# Logs go to $OUT/gpu-dist (or build-gpu/logs/gpu-dist).
set -uo pipefail
cd "$(dirname "$0")/.."
MINFER=${1:-build-gpu/minfer}
DEVICE=${DEVICE:-cuda}
if [ "$DEVICE" = cuda ]; then
  GPUS=$(nvidia-smi -L 2>/dev/null | wc -l)
else
  GPUS=4
fi
RANKS=${RANKS:-$((GPUS < 8 ? GPUS : 8))}
LOGS=${OUT:-build-gpu/logs}/gpu-dist
MODELS=/tmp/minfer-models
mkdir -p "$LOGS" "$MODELS"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
FAILED=0
run() {  # NAME COMMAND...: output in $LOGS/NAME.log
  echo "=== $1"
  local name=$1
  shift
  "$@" 2>&1 | tee "$LOGS/$name.log"
  local rc=${PIPESTATUS[0]}
  ((rc == 0)) || { echo "=== $name FAILED ($rc)"; FAILED=1; }
}
synth() {  # PRESET DTYPE [LAYERS]: prints the path
  local f=$MODELS/$1-$2${3:+-L$3}.gguf
  [ -f "$f" ] || "$MINFER" synth --preset "$1" --dtype "$2" ${3:+--layers "$3"} -o "$f" >&2
  echo "$f"
}
same_tokens() {  # A.jsonl B.jsonl: prints how many requests agree; fails if fewer than all
  python3 - "$1" "$2" <<'EOF'
import json, sys
a, b = ([json.loads(l)["choices"][0]["token_ids"] for l in open(p)] for p in sys.argv[1:3])
same = sum(x == y for x, y in zip(a, b))
first = [next((i for i, (s, t) in enumerate(zip(x, y)) if s != t), None) for x, y in zip(a, b)]
print(f"{same} of {len(a)} requests equal; the others part at tokens {[f for f in first if f is not None]}")
sys.exit(0 if same == len(a) == len(b) else 1)
EOF
}
echo "gpu-dist.sh: $DEVICE, $RANKS ranks, $(mpirun --version 2>&1 | head -1)"

# 1. Correctness.
python3 - >"$LOGS/requests.jsonl" <<'EOF'
import json
words = ["Once upon a time", "The little dog", "Lily wanted", "One day, a bird", "Tom and Sue", "The sun"]
for i in range(32):
    print(json.dumps({"id": i, "prompt": words[i % 6], "max_tokens": 48, "temperature": 0}))
EOF
io=(--input "$LOGS/requests.jsonl" --device "$DEVICE")
run tp1 "$MINFER" generate "${io[@]}" --output "$LOGS/tp1.jsonl"
run tp2 mpirun -np 2 "$MINFER" generate "${io[@]}" --output "$LOGS/tp2.jsonl" -tp 2
run tp2-equal same_tokens "$LOGS/tp1.jsonl" "$LOGS/tp2.jsonl"
moe=(--synthetic qwen3moe-tiny:f32)
run ep1 "$MINFER" generate "${moe[@]}" "${io[@]}" --output "$LOGS/ep1.jsonl"
run ep2 mpirun -np 2 "$MINFER" generate "${moe[@]}" "${io[@]}" --output "$LOGS/ep2.jsonl" -tp 2 --enable-expert-parallel
run ep2-equal same_tokens "$LOGS/ep1.jsonl" "$LOGS/ep2.jsonl"

# 2. Collectives.
for n in 2 4 8; do
  ((n <= RANKS)) || continue
  run "collectives-$n" mpirun -np "$n" "$MINFER" bench collectives --device "$DEVICE" \
    --max-bytes "$([ "$DEVICE" = cuda ] && echo 268435456 || echo 1048576)"
done

# 3. Scaling (on the CPU: two small presets and short runs, to check the steps).
if [ "$DEVICE" = cuda ]; then
  dense=$(synth llama3-8b bf16) big=$(synth llama3-70b bf16 "${LAYERS_70B:-16}") experts=$(synth qwen3moe-30b-a3b bf16 8)
  lens=(--input-len 512 --output-len 128 --repetitions 3)
else
  dense=$(synth tiny f32) big=$(synth l134m f32) experts=$(synth qwen3moe-tiny f32)
  lens=(--input-len 32 --output-len 8 --repetitions 1)
fi
latency() {  # NAME RANKS MODEL BATCH [FLAGS...]
  local name=$1 n=$2 model=$3 batch=$4
  shift 4
  if ((n == 1)); then
    run "$name" "$MINFER" bench latency "$model" --device "$DEVICE" --batch "$batch" "${lens[@]}" "$@"
  else
    run "$name" mpirun -np "$n" "$MINFER" bench latency "$model" --device "$DEVICE" --batch "$batch" "${lens[@]}" \
      -tp "$n" "$@"
  fi
}
for n in 1 2 4 8; do
  ((n <= RANKS)) || continue
  for batch in 1 64; do latency "dense-tp$n-b$batch" "$n" "$dense" "$batch"; done
  ((n > 1)) && latency "big-tp$n-b1" "$n" "$big" 1
  ((n > 1)) && latency "experts-ep$n-b1" "$n" "$experts" 1 --enable-expert-parallel
done
echo "gpu-dist.sh: logs in $LOGS"
exit "$FAILED"
