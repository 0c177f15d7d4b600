#!/usr/bin/env bash
# Runs on the GPU machine (Ubuntu-like, x86-64, CUDA 13, no network), from the
# repository root: builds minfer with the CUDA backend against the Debian
# packages that scripts/gpu-bundle.sh gathered into .gpu/, then runs the GPU
# tests. Nothing is installed into /: the packages are unpacked under /tmp.
#
#   bash scripts/gpu.sh [--build] [--test] [--synth] [--real] [--serve] [--bench] [--grammar-bench] [--memcheck] [--racecheck]
#                       [--ladder] [--dev] [--prebuilt] [--sync] [--filter OP]
#
#   --build       unpack .gpu/debs, configure (-DMINFER_CUDA=ON, Ninja) and build
#   --test        run minfer_gpu_ops, minfer_gpu_model, `minfer run --device cuda`, and
#                 `minfer generate --device cuda` (scripts/check_generate.py)
#                 against the llama2.c reference, and CUDA graphs against --enforce-eager
#                 (scripts/check_graphs.py), and 64 grammar-constrained samples a request
#                 that must validate (scripts/check_grammar.py)
#   --synth       logits and greedy tokens GPU against CPU on random-weight models of
#                 real shapes (llama3-8b bf16 and q4_k_m, llama3-1b, qwen2, gemma3;
#                 SYNTH_MODELS="PRESET:DTYPE:THRESHOLD ..." picks others)
#   --real        the same (logits, greedy tokens where the margin is clear) for the real
#                 GGUF models in /tmp/minfer-models/real, carried there in parts by
#                 scripts/gpu-model-parts.sh
#   --ops         only minfer_gpu_ops (with --filter: the ops whose name holds it)
#   --serve       the server tests (tests/integration/test_server.py) against
#                 `minfer serve --device cuda`, and disaggregation's (test_disaggregation.py:
#                 a prefill and a decode instance sharing the GPU)
#   --disagg-bench one prompt's KV moved between two instances on the GPU
#                 (scripts/kv_transfer_probe.py, llama3-8b:bf16, 512/2048/8192 tokens)
#   --bench       minfer bench latency, 512 in / 128 out, on BENCH_MODELS="PRESET:DTYPE:BATCH ..."
#                 (default: every workload of the D2 and D3 tables; graphs, and at batch 1
#                 also eager and, unless BENCH_FP8= is empty, --quantization fp8), then
#                 minfer_gpu_ops --bench (BENCH_OPS= skips it), all into $LOGS/bench.log;
#                 scripts/bench_table.py makes the issues' table of it, $LOGS/bench-table.log
#                 (copy it to kernels/cuda/BENCH.md, which the book quotes).
#                 BENCH_BASELINE=FILE (a minfer binary, or one compressed .xz, such as an
#                 earlier commit's build carried under .gpu/old): each run is then repeated
#                 right after with that binary, under the same header marked "(baseline)",
#                 which the table ignores: versions compared in one run
#   --grammar-bench scripts/grammar_decode_bench.sh: decode speed at batch GRAMMAR_BENCH_BATCH=64
#                 under a JSON Schema against free text, through minfer serve on
#                 GRAMMAR_MODEL=llama3-8b:bf16 (a synthetic vocabulary of the preset's size),
#                 into $LOGS/grammar-bench.log
#   --spec-bench  scripts/spec_bench.sh: speculative decoding's speedup (bench latency with and
#                 without, n-gram and a draft model) on SPEC_MODEL=llama3-8b:bf16 with
#                 SPEC_DRAFT=llama3-8b:q4_k_m (the same random weights, quantized) as its
#                 draft, into $LOGS/spec-bench.log
#   --serve-bench scripts/serve_bench.sh: minfer bench serve against minfer serve on
#                 llama3-8b bf16 (SERVE_MODEL=PRESET:DTYPE), rate inf and 2/8/32 req/s,
#                 results and plots into $LOGS/serve-bench
#   --profile     per-kernel GPU time (ncu, eager) of PROFILE_STEPS=2 decode steps after a
#                 512-token prefill, or of the prefill itself, on the model's first
#                 PROFILE_LAYERS=2 blocks (each layer's kernels are the same), with DRAM bytes and
#                 speed-of-light percentages, for PROFILE_RUNS="PRESET:DTYPE:BATCH[:OPTS] ..."
#                 (OPTS: prefill and/or fp8, joined by +; default every row of the D2 and
#                 D3 tables), summed per kernel, each with its limiter, by
#                 scripts/kernel_times.py into $LOGS/profile-*.log
#   --profile-kernel RE  ncu's full report (--set full) of one decode-step launch of each
#                 kernel whose name matches RE, in an eager run of PROFILE_KERNEL_RUN
#                 (PRESET:DTYPE:BATCH, default llama3-8b:bf16:64, first PROFILE_LAYERS=2 blocks;
#                 the first PROFILE_SKIP=64 matching launches skipped), into $LOGS/ncu-kernel.log
#   --moe         mixture of experts: minfer_gpu_ops' MoE cases, the tiny MoE presets' logits
#                 against the CPU's (minfer_gpu_model), CUDA graphs against eager on qwen3moe-tiny,
#                 and the first MOE_LAYERS=4 layers of qwen3moe-30b-a3b (q4_k_m and bf16): logits
#                 against the CPU, then minfer bench latency at batch 1 and 64, into $LOGS/moe-bench.log
#   --ladder      chapter 2's kernel ladder (kernels/cuda/ladder): minfer_ladder_exercises (vector
#                 add, reduction, softmax, transpose) and minfer_ladder_matmul (naive to mma.sync
#                 against cuBLASLt), each version checked against the CPU and timed, into
#                 $LOGS/ladder.log (LADDER_ARGS= passes flags to the matmul, e.g. "--size 8192")
#   --dev         the kernels' experiments (kernels/cuda/dev): each program checks every version of
#                 one kernel, the production one among them, against the CPU and times it on the
#                 engine's shapes (minfer_dev_q8_0_gemv: Q8_0's GEMV on GGUF's blocks, repacked, and regrouped on int8 activations;
#                 minfer_dev_k_quant_gemv: Q4_K's and Q6_K's on fp32 activations and with dp4a on int8 ones;
#                 minfer_dev_quant_gemm: the quantized GEMM of 32 and 64 rows with one weight tile and two),
#                 then, where .gpu/ggml-test-backend-ops.xz is carried, llama.cpp's kernels on the
#                 down shape (scripts/ggml-ops-bench.sh), into $LOGS/dev.log
#   --memcheck    also run minfer_gpu_ops under compute-sanitizer --tool memcheck
#   --racecheck   also run minfer_gpu_ops under compute-sanitizer --tool racecheck
#   --prebuilt    use the binaries carried in .gpu/bin (.gpu/lib for their libraries)
#                 instead of building
#   --sync        MINFER_CUDA_SYNC=1: wait after every op, so a fault names its op
#   --filter OP   only the minfer_gpu_ops cases whose op name contains OP
#   --deps DIR    where the packages are unpacked (default /tmp/minfer-deps)
#   --build-dir DIR                                (default build-gpu)
# MINFER_COMMIT names the source in the table's header (the machine's copy of the tree
# may not carry the repository's history). With no step flag it does --build --test. Logs go to $BUILD_DIR/logs and,
# when $OUT is set, to $OUT/gpu-logs.tgz (this run's phases, renewed as each
# ends). Prints a table of the phases' times at the end and exits non-zero if
# any phase failed.
set -uo pipefail
cd "$(dirname "$0")/.."

DO_BUILD=0 DO_TEST=0 DO_OPS=0 DO_SYNTH=0 DO_REAL=0 DO_SERVE=0 DO_BENCH=0 DO_SERVE_BENCH=0 DO_GRAMMAR_BENCH=0 DO_SPEC_BENCH=0 DO_MOE=0 DO_DISAGG_BENCH=0 DO_LADDER=0 DO_DEV=0 DO_PROFILE=0 DO_MEMCHECK=0 DO_RACECHECK=0 PREBUILT=0 FILTER=""
PROFILE_KERNEL=""
DEPS=/tmp/minfer-deps
BUILD_DIR=build-gpu
while (($#)); do
  case "$1" in
    --build) DO_BUILD=1 ;;
    --test) DO_TEST=1 ;;
    --ops) DO_OPS=1 ;;
    --synth) DO_SYNTH=1 ;;
    --real) DO_REAL=1 ;;
    --serve) DO_SERVE=1 ;;
    --bench) DO_BENCH=1 ;;
    --profile) DO_PROFILE=1 ;;
    --profile-kernel) PROFILE_KERNEL=$2; shift ;;
    --serve-bench) DO_SERVE_BENCH=1 ;;
    --grammar-bench) DO_GRAMMAR_BENCH=1 ;;
    --spec-bench) DO_SPEC_BENCH=1 ;;
    --moe) DO_MOE=1 ;;
    --disagg-bench) DO_DISAGG_BENCH=1 ;;
    --ladder) DO_LADDER=1 ;;
    --dev) DO_DEV=1 ;;
    --memcheck) DO_MEMCHECK=1 ;;
    --racecheck) DO_RACECHECK=1 ;;
    --prebuilt) PREBUILT=1 ;;
    --sync) export MINFER_CUDA_SYNC=1 ;;
    --filter) FILTER=$2; shift ;;
    --deps) DEPS=$2; shift ;;
    --build-dir) BUILD_DIR=$2; shift ;;
    -h|--help) sed -n '2,40p' "$0"; exit 0 ;;
    *) echo "gpu.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
((DO_BUILD || DO_TEST || DO_OPS || DO_SYNTH || DO_REAL || DO_SERVE || DO_BENCH || DO_SERVE_BENCH || DO_GRAMMAR_BENCH || DO_SPEC_BENCH || DO_MOE || DO_DISAGG_BENCH || DO_LADDER || DO_DEV || DO_PROFILE || DO_MEMCHECK || DO_RACECHECK)) || [ -n "$PROFILE_KERNEL" ] || { DO_BUILD=1; DO_TEST=1; }
((PREBUILT)) && DO_BUILD=0

LOGS=$BUILD_DIR/logs
mkdir -p "$LOGS"
TABLE=()
RAN=()  # this run's phase logs
FAILED=0

# run_phase NAME COMMAND...: runs the command with its output in $LOGS/NAME.log, and times it.
run_phase() {
  local name=$1; shift
  echo "=== $name"
  local t0 t1 rc
  t0=$(date +%s.%N)
  "$@" 2>&1 | tee "$LOGS/$name.log"
  rc=${PIPESTATUS[0]}
  t1=$(date +%s.%N)
  TABLE+=("$(awk -v n="$name" -v a="$t0" -v b="$t1" -v rc="$rc" \
    'BEGIN { printf "%-10s %8.1f s  %s", n, b - a, rc == 0 ? "ok" : "FAIL (exit " rc ")" }')")
  ((rc == 0)) || FAILED=1
  RAN+=("$name.log")
  # This run's logs reach $OUT as soon as each phase ends, so a run cut short still reports.
  if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ]; then
    tar czf "$OUT/gpu-logs.tgz" -C "$LOGS" "${RAN[@]}" 2>/dev/null || true
  fi
  printf '%s\n' "${TABLE[@]}" >"${OUT:-$LOGS}/summary-so-far.log" 2>/dev/null || true
  return "$rc"
}

finish() {
  {
    echo
    echo "phase        time      result"
    printf '%s\n' "${TABLE[@]}"
  } | tee "$LOGS/summary.log"
  if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ]; then
    cp "$LOGS/summary.log" "$OUT"/ 2>/dev/null || true
  fi
  exit "$FAILED"
}

# ---- the packages, unpacked under $DEPS ---------------------------------------------
unpack() {
  local debs=(.gpu/debs/*.deb)
  [ -e "${debs[0]}" ] || { echo "no .gpu/debs/*.deb: run scripts/gpu-bundle.sh here first and carry .gpu"; return 1; }
  local stamp; stamp=$(ls .gpu/debs | md5sum)
  if [ -f "$DEPS/.unpacked" ] && [ "$(cat "$DEPS/.unpacked")" = "$stamp" ]; then
    echo "$DEPS is up to date"
    return 0
  fi
  rm -rf "$DEPS" && mkdir -p "$DEPS" || return 1
  for deb in "${debs[@]}"; do
    if command -v dpkg-deb >/dev/null; then
      dpkg-deb -x "$deb" "$DEPS" || return 1
    else  # a .deb is an ar archive holding data.tar.*
      local tmp; tmp=$(mktemp -d)
      (cd "$tmp" && ar x "$OLDPWD/$deb" && tar -xf data.tar.* -C "$DEPS") || return 1
      rm -rf "$tmp"
    fi
  done
  # The .pc files say prefix=/usr: point them at the unpacked tree.
  sed -i "s|=/usr|=$DEPS/usr|" "$DEPS"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc "$DEPS"/usr/share/pkgconfig/*.pc
  echo "$stamp" >"$DEPS/.unpacked"
  du -sh "$DEPS"
}

use_deps() {
  export PKG_CONFIG_PATH="$DEPS/usr/lib/x86_64-linux-gnu/pkgconfig:$DEPS/usr/share/pkgconfig"
  # The libraries' own dependencies are found through this at link time and at run time.
  export LD_LIBRARY_PATH="$DEPS/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

configure() {
  # The carried pkg-config, whether or not the machine has one: one path, tested by gpu-bundle.sh --check.
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMINFER_CUDA=ON \
    -DCMAKE_PREFIX_PATH="$DEPS/usr" -DPKG_CONFIG_EXECUTABLE="$DEPS/usr/bin/pkg-config"
}

build() {
  local ladder=()
  ((DO_LADDER)) && ladder=(minfer_ladder_exercises minfer_ladder_matmul)
  ((DO_DEV)) && ladder+=("${DEV_PROGRAMS[@]}")
  ninja -C "$BUILD_DIR" -j"$(nproc)" minfer minfer_gpu_ops minfer_gpu_model ${ladder[@]+"${ladder[@]}"}
}

# Chapter 2's ladder: both programs, one log. Each prints PASS/FAIL a version and exits
# non-zero if any version failed its CPU check.
ladder() {
  local rc=0
  "$LADDER_BIN/minfer_ladder_exercises" || rc=1
  echo
  # shellcheck disable=SC2086  # LADDER_ARGS is a list of flags
  "$LADDER_BIN/minfer_ladder_matmul" ${LADDER_ARGS:-} || rc=1
  return "$rc"
}

# The kernels' experiments: every program, one log; each exits non-zero if a version failed its check.
DEV_PROGRAMS=(minfer_dev_q8_0_gemv minfer_dev_k_quant_gemv minfer_dev_quant_gemm)
dev_programs() {
  local rc=0 p
  for p in "${DEV_PROGRAMS[@]}"; do
    "$DEV_BIN/$p" || rc=1
    echo
  done
  # llama.cpp's kernels on the same down shape, where the bundle carries them
  # (scripts/ggml-ops-bench.sh; gpu-bundle.sh --ggml DIR).
  if [ -f .gpu/ggml-test-backend-ops.xz ]; then
    xz -dc .gpu/ggml-test-backend-ops.xz > /tmp/ggml-test-backend-ops && chmod +x /tmp/ggml-test-backend-ops
    scripts/ggml-ops-bench.sh run /tmp/ggml-test-backend-ops 1 || rc=1
  fi
  return "$rc"
}

# ---- tests ---------------------------------------------------------------------------------
REFERENCE=.gpu/reference/run_c_greedy.json
[ -f "$REFERENCE" ] || REFERENCE=../shared/reference/stories260K/run_c_greedy.json
OPS_ARGS=()
[ -n "$FILTER" ] && OPS_ARGS=(--filter "$FILTER")

# The CLI end to end on the GPU: greedy tokens of one reference case.
check_cli() {
  "$MINFER" run models/stories260K.gguf --device cuda --kv-cache-dtype float32 -p "Once upon a time" -n 60 --temp 0 \
    --json |
    python3 -c '
import json, sys
ref = [c for c in json.load(open(sys.argv[1])) if c["prompt"] == "Once upon a time" and c["steps"] == 64][0]
got = json.loads(sys.stdin.read().strip().splitlines()[-1])
ok = got["generated_ids"] == ref["generated_ids"] and got["prompt_ids"] == ref["prompt_ids"]
print("minfer run --device cuda:", "matches the llama2.c reference" if ok else "DIFFERS from the llama2.c reference")
sys.exit(0 if ok else 1)' "$REFERENCE"
}

# racecheck reports hazards inside cuBLASLt's own split-K kernels (nvjet_*),
# which are not ours to fix (and excluding them by name crashes the tool):
# fail on the harness's own failures and on any hazard in any other kernel.
racecheck_ours() {
  local log; log=$(mktemp)
  "$1" --tool racecheck "$BIN/minfer_gpu_ops" "${OPS_ARGS[@]}" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local ours; ours=$(grep "Race reported" "$log" | grep -vc nvjet_)
  echo "racecheck: $(grep -c "Race reported" "$log") hazard reports, $ours outside cuBLASLt"
  rm -f "$log"
  [ "$rc" -eq 0 ] && [ "$ours" -eq 0 ]
}

find_ncu() {
  command -v ncu && return
  for p in /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu; do
    [ -x "$p" ] && { echo "$p"; return; }
  done
  return 1
}

find_sanitizer() {
  command -v compute-sanitizer && return
  for p in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
    [ -x "$p" ] && { echo "$p"; return; }
  done
  return 1
}

echo "gpu.sh: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1); $(nproc) cores"
if ((PREBUILT)); then
  BIN=.gpu/bin
  LADDER_BIN=.gpu/bin
  DEV_BIN=.gpu/bin
  MINFER=.gpu/bin/minfer
  [ -f .gpu/bin.tar.xz ] && tar xJf .gpu/bin.tar.xz -C .gpu
  [ -f .gpu/dev.tar.xz ] && tar xJf .gpu/dev.tar.xz -C .gpu  # the experiments alone (gpu-bundle.sh --ggml)
  # The binaries link NCCL: the toolkit's copy, or the one PyTorch's wheels bring.
  nccl_dir=$( { ldconfig -p | awk '/libnccl\.so\.2 / { print $NF }'
                ls /usr/local/cuda*/lib*/libnccl.so.2 /usr/lib/x86_64-linux-gnu/libnccl.so.2 \
                  /usr/local/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2 \
                  /usr/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2; } 2>/dev/null | head -1)
  echo "gpu.sh: NCCL ${nccl_dir:-not found}"
  export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64${nccl_dir:+:$(dirname "$nccl_dir")}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  [ -x "$BIN/minfer_gpu_ops" ] || [ -x "$DEV_BIN/minfer_dev_k_quant_gemv" ] ||
    { echo "no $BIN/minfer_gpu_ops: run scripts/gpu-bundle.sh --prebuilt here first"; exit 2; }
else
  BIN=$BUILD_DIR/tests/gpu
  LADDER_BIN=$BUILD_DIR/kernels/cuda/ladder
  DEV_BIN=$BUILD_DIR/kernels/cuda/dev
  MINFER=$BUILD_DIR/minfer
  use_deps
fi

if ((DO_BUILD)); then
  run_phase unpack unpack || finish
  run_phase configure configure || finish
  run_phase build build || finish
fi
if ((DO_OPS && !DO_TEST)); then
  run_phase ops "$BIN/minfer_gpu_ops" "${OPS_ARGS[@]}"
fi
if ((DO_TEST)); then
  run_phase ops "$BIN/minfer_gpu_ops" "${OPS_ARGS[@]}"
  run_phase model "$BIN/minfer_gpu_model" --model models/stories260K.gguf --reference "$REFERENCE"
  run_phase cli check_cli
  run_phase engine python3 scripts/check_generate.py "$MINFER" "$REFERENCE" --device cuda --kv-cache-dtype float32
  run_phase engine-bf16 python3 scripts/check_generate.py "$MINFER" "$REFERENCE" --device cuda \
    --kv-cache-dtype bfloat16 --against-device cpu
  # Speculation: greedy output on the device equals llama2.c's with either proposer.
  run_phase engine-ngram python3 scripts/check_generate.py "$MINFER" "$REFERENCE" --device cuda \
    --kv-cache-dtype float32 --num-speculative-tokens 4
  run_phase engine-draft python3 scripts/check_generate.py "$MINFER" "$REFERENCE" --device cuda \
    --kv-cache-dtype float32 --speculative-model models/stories260K.gguf --num-speculative-tokens 3
  run_phase graphs python3 scripts/check_graphs.py "$MINFER"
  run_phase graphs-gemma3 python3 scripts/check_graphs.py "$MINFER" --synthetic gemma3-270m:bf16
  run_phase grammar python3 scripts/check_grammar.py "$MINFER" models/stories260K.gguf --device cuda
  run_phase grammar-gemma3 python3 scripts/check_grammar.py "$MINFER" --synthetic gemma3-270m:bf16 --device cuda
fi
# Random-weight models of real shapes, written once per machine (quantizing 8B
# weights takes minutes; the files are reused by later calls on a warm machine).
MODELS=/tmp/minfer-models
synth_model() {  # PRESET DTYPE [LAYERS]: prints the path
  local f=$MODELS/$1-$2${3:+-L$3}.gguf
  mkdir -p "$MODELS"
  if [ ! -f "$f" ]; then
    "$MINFER" synth --preset "$1" --dtype "$2" ${3:+--layers "$3"} -o "$f.tmp" >&2 && mv "$f.tmp" "$f"
  fi
  echo "$f"
}
if ((DO_SYNTH)); then
  # PRESET:DTYPE:THRESHOLD. Thresholds: whole forwards of 16-32 random-weight layers,
  # the GPU's GEMMs taking bf16 activations (and the CPU's quantized dots int8 ones).
  for spec in ${SYNTH_MODELS:-llama3-8b:bf16:5e-2 llama3-8b:q4_k_m:1.5e-1 llama3-1b:f32:1e-4 qwen2-0.5b:q8_0:1e-1 gemma3-270m:bf16:5e-2}; do
    IFS=: read -r preset dtype threshold <<<"$spec"
    run_phase "synth-$preset-$dtype" "$BIN/minfer_gpu_model" --synthetic "$(synth_model "$preset" "$dtype")" \
      --threshold "$threshold"
    # The same over a bf16 KV pool on both sides (the engine's default on cuda). The two
    # sides round different fp32 K/V to bf16, and one flipped rounding moves an element by
    # up to 2^-8 of it: 2-3e-3 over llama3-1b's 16 layers, so no threshold under 1e-2.
    run_phase "synth-$preset-$dtype-bf16kv" "$BIN/minfer_gpu_model" --synthetic "$(synth_model "$preset" "$dtype")" \
      --threshold "$(awk -v t="$threshold" 'BEGIN { print (t < 1e-2 ? 1e-2 : t) }')" --kv-cache-dtype bfloat16
  done
fi
if ((DO_REAL)); then
  # Real weights, quantized (Q4_1, Q4_K_M): the GPU's GEMVs take fp32 activations,
  # the CPU's dots int8 ones, hence the threshold.
  found=0
  for model in "$MODELS"/real/*.gguf; do
    [ -f "$model" ] || continue
    found=1
    name=$(basename "$model" .gguf)
    run_phase "real-$name" "$BIN/minfer_gpu_model" --synthetic "$model" --threshold "${REAL_THRESHOLD:-1e-1}"
    run_phase "real-$name-bf16kv" "$BIN/minfer_gpu_model" --synthetic "$model" --threshold "${REAL_THRESHOLD:-1e-1}" \
      --kv-cache-dtype bfloat16
  done
  ((found)) || { TABLE+=("real            -    FAIL (no model in $MODELS/real)"); FAILED=1; }
fi
if ((DO_SERVE)); then
  run_phase serve env MINFER_TEST_DEVICE=cuda MINFER_BIN="$PWD/$MINFER" python3 -m pytest -q tests/integration/test_server.py
  # Prefill and decode instances sharing the GPU: KV blocks copied out of and into device memory.
  run_phase disagg env MINFER_TEST_DEVICE=cuda MINFER_BIN="$PWD/$MINFER" OMPI_ALLOW_RUN_AS_ROOT=1 \
    OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 python3 -m pytest -q tests/integration/test_disaggregation.py
fi
# One prompt's KV from a prefill to a decode instance sharing the GPU (TCP over loopback):
# bytes, seconds and bandwidth for 8B-shaped bf16 KV (128 KiB a token).
if ((DO_DISAGG_BENCH)); then
  run_phase kv-probe python3 scripts/kv_transfer_probe.py --minfer "$MINFER" --lengths 512,2048,8192 -- \
    --synthetic llama3-8b:bf16 --device cuda --kv-cache-memory 6G --max-model-len 16384
fi
# Every workload of the D2 and D3 tables (scripts/bench_table.py).
BENCH_TABLE_MODELS="llama3-8b:bf16:1 llama3-1b:bf16:1 llama3-8b:bf16:64 llama3-8b:bf16:128 llama3-8b:q8_0:1 llama3-8b:q4_k_m:1 llama3-8b:q4_k_m:64"
# The same rows for --profile: every D2 and D3 workload, the prefill rows included.
PROFILE_TABLE_RUNS="llama3-8b:bf16:1 llama3-8b:bf16:1:prefill llama3-8b:bf16:64 llama3-8b:bf16:128 llama3-1b:bf16:1
  llama3-8b:bf16:1:fp8 llama3-8b:bf16:1:prefill+fp8 llama3-8b:q8_0:1 llama3-8b:q4_k_m:1 llama3-8b:q4_k_m:1:prefill
  llama3-8b:q4_k_m:64"
if ((DO_BENCH)); then
  # One run with a switch of kernels/cuda/cuda_options.h off, to compare with the
  # default in the same run: VAR PRESET:DTYPE PATH BATCH.
  bench_switch_off() {
    echo "--- $2 --batch $4 --input-len 512 --output-len 128 ($1=0)"
    env "$1=0" "$MINFER" bench latency "$3" --device cuda --batch "$4" --input-len 512 --output-len 128 \
      --repetitions 3
  }
  # BENCH_BASELINE: the binary to compare with, unpacked if compressed.
  baseline=""
  if [ -n "${BENCH_BASELINE:-}" ]; then
    case "$BENCH_BASELINE" in
      *.xz) baseline=/tmp/minfer-baseline; xz -dc "$BENCH_BASELINE" > "$baseline" && chmod +x "$baseline" ;;
      *) baseline=$BENCH_BASELINE ;;
    esac
    [ -x "$baseline" ] || { echo "gpu.sh: BENCH_BASELINE=$BENCH_BASELINE is not a binary" >&2; exit 2; }
  fi
  bench_table() {
    local spec preset dtype batch args
    for spec in ${BENCH_MODELS:-$BENCH_TABLE_MODELS}; do
      IFS=: read -r preset dtype batch <<<"$spec"
      batch=${batch:-1}
      local path; path=$(synth_model "$preset" "$dtype")
      # At batch 1 also eager, and for bf16 --quantization fp8 (unless BENCH_FP8 is set empty).
      local variants=("")
      if [ "$batch" = 1 ]; then
        variants+=("--enforce-eager")
        [ "$dtype" = bf16 ] && [ -n "${BENCH_FP8-1}" ] && variants+=("--quantization fp8")
      fi
      for args in "${variants[@]}"; do
        echo "--- $preset:$dtype --batch $batch --input-len 512 --output-len 128 $args"
        "$MINFER" bench latency "$path" --device cuda --batch "$batch" --input-len 512 --output-len 128 \
          --repetitions 3 $args || return 1
        if [ -n "$baseline" ]; then
          echo "--- $preset:$dtype --batch $batch --input-len 512 --output-len 128 $args (baseline)"
          "$baseline" bench latency "$path" --device cuda --batch "$batch" --input-len 512 --output-len 128 \
            --repetitions 3 $args || return 1
        fi
      done
      # What programmatic dependent launch is worth: the same batch without it.
      if [ "$batch" = 1 ] && [ "$dtype" = bf16 ]; then
        bench_switch_off MINFER_PDL "$preset:$dtype" "$path" 1 || return 1
      fi
      # What the norms' and SwiGLU's bf16 copies are worth to the prefill: conversion passes instead.
      if [ "$batch" = 1 ] && [ "$preset:$dtype" = llama3-8b:bf16 ]; then
        bench_switch_off MINFER_FUSED_CONVERT "$preset:$dtype" "$path" 1 || return 1
      fi
    done
    [ -n "${BENCH_OPS-1}" ] && "$BIN/minfer_gpu_ops" --bench
    # The scalar decode kernel over a bf16 pool, against decode_bf16_kernel above.
    if [ -n "${BENCH_OPS-1}" ]; then
      echo "--- attention with MINFER_DECODE_MMA=0"
      MINFER_DECODE_MMA=0 "$BIN/minfer_gpu_ops" --bench-attention | sed 's/^bench attention/bench attention scalar/'
      local path8; path8=$(synth_model llama3-8b bf16)
      bench_switch_off MINFER_DECODE_MMA llama3-8b:bf16 "$path8" 64 || return 1
      # Quantized matmuls of 9..64 rows by widening + cuBLASLt, against quant_gemm_kernel.
      local pathq; pathq=$(synth_model llama3-8b q4_k_m)
      bench_switch_off MINFER_QUANT_MMA llama3-8b:q4_k_m "$pathq" 64 || return 1
      echo "--- quantized matmuls with MINFER_QUANT_MMA=0"
      MINFER_QUANT_MMA=0 "$BIN/minfer_gpu_ops" --bench-matmul | grep "rows=64" | sed 's/^bench /bench widen+gemm /'
    fi
    return 0
  }
  run_phase bench bench_table
fi
if ((DO_SERVE_BENCH)); then
  serve_model=${SERVE_MODEL:-llama3-8b:bf16}
  rm -rf "$LOGS/serve-bench"
  run_phase serve-bench bash scripts/serve_bench.sh "$MINFER" "$(synth_model "${serve_model%%:*}" "${serve_model##*:}")" \
    "$LOGS/serve-bench" --max-num-batched-tokens 8192
  RAN+=(serve-bench)  # the result JSONs and plots travel with the logs
fi
if ((DO_MOE)); then
  run_phase moe-ops "$BIN/minfer_gpu_ops" --filter moe
  for spec in qwen3moe-tiny:f32:1e-4 qwen2moe-tiny:q4_k_m:1.5e-1 mixtral-tiny:bf16:5e-2; do
    IFS=: read -r preset dtype threshold <<<"$spec"
    run_phase "moe-$preset-$dtype" "$BIN/minfer_gpu_model" --synthetic "$(synth_model "$preset" "$dtype")" \
      --threshold "$threshold"
  done
  run_phase moe-graphs python3 scripts/check_graphs.py "$MINFER" --synthetic qwen3moe-tiny:q4_k_m
  moe_layers=${MOE_LAYERS:-4}
  run_phase moe-30b-q4_k_m "$BIN/minfer_gpu_model" \
    --synthetic "$(synth_model qwen3moe-30b-a3b q4_k_m "$moe_layers")" --threshold 1.5e-1
  moe_bench() {
    local dtype batch path
    for dtype in q4_k_m bf16; do
      path=$(synth_model qwen3moe-30b-a3b "$dtype" "$moe_layers")
      for batch in 1 64; do
        echo "--- qwen3moe-30b-a3b:$dtype (first $moe_layers layers) --batch $batch --input-len 512 --output-len 128"
        "$MINFER" bench latency "$path" --device cuda --batch "$batch" --input-len 512 --output-len 128 \
          --repetitions 3 || return 1
      done
    done
  }
  run_phase moe-bench moe_bench
fi
if ((DO_SPEC_BENCH)); then
  spec_model=${SPEC_MODEL:-llama3-8b:bf16} spec_draft=${SPEC_DRAFT-llama3-8b:q4_k_m}  # SPEC_DRAFT=: n-gram only
  run_phase spec-bench bash scripts/spec_bench.sh "$MINFER" "$(synth_model "${spec_model%%:*}" "${spec_model##*:}")" \
    "${spec_draft:+$(synth_model "${spec_draft%%:*}" "${spec_draft##*:}")}" --device cuda
fi
if ((DO_GRAMMAR_BENCH)); then
  grammar_model=${GRAMMAR_MODEL:-llama3-8b:bf16}
  run_phase grammar-bench bash scripts/grammar_decode_bench.sh "$MINFER" \
    "$(synth_model "${grammar_model%%:*}" "${grammar_model##*:}")" "$LOGS/grammar" --max-num-batched-tokens 8192
fi
if ((DO_BENCH || DO_SERVE_BENCH)); then
  # The issues' table (D2, D3) from this machine's latest runs, for kernels/cuda/BENCH.md
  # and the book's chapter 5.4.
  table_args=()
  [ -d "$LOGS/serve-bench" ] && table_args=(--serve "$LOGS/serve-bench")
  run_phase bench-table python3 scripts/bench_table.py "$LOGS/bench.log" "${table_args[@]}" \
    --device "one $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" \
    --source "${MINFER_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo 'commit unknown')}, $(date -u +%Y-%m-%d)"
fi
if [ -n "$PROFILE_KERNEL" ]; then
  # Why one kernel runs at the speed it does: throughput against the SM's and memory's
  # peaks, warp stall reasons, shared-memory bank conflicts, occupancy.
  profile_kernel() {
    local ncu path preset dtype batch
    IFS=: read -r preset dtype batch <<<"${PROFILE_KERNEL_RUN:-llama3-8b:bf16:64}"
    ncu=$(find_ncu) || { echo "no ncu"; return 1; }
    path=$(synth_model "$preset" "$dtype" "${PROFILE_LAYERS:-2}")  # see --profile below
    "$ncu" --set full -k "regex:$PROFILE_KERNEL" --launch-skip "${PROFILE_SKIP:-64}" --launch-count 1 \
      "$MINFER" bench latency "$path" --device cuda --enforce-eager --batch "${batch:-1}" --input-len 512 \
      --output-len 8 --repetitions 1 --warmup 0
  }
  run_phase ncu-kernel profile_kernel
fi
if ((DO_PROFILE)); then
  # ncu replays each kernel once per group of counters, and first saves the device memory
  # it can reach: with a whole 8B model's 16 GB that is most of a second a launch (a
  # 4-step profile did not end in 8 minutes). Every layer runs the same kernels on the
  # same shapes, so the profile runs on the model's first PROFILE_LAYERS=2 blocks
  # (`minfer synth --layers`); the embedding and LM head stay whole.
  # ncu times each kernel alone (serialized, clocks left as they are) in a few decode
  # steps at the bench's context (512 + 1..PROFILE_STEPS; `bench latency --profile-steps`
  # brackets them, so the prefill is not counted), or in the 512-token prefill
  # (--profile-prefill); the sum per step, set against the graph step time of --bench,
  # shows what launches and gaps cost. DRAM bytes and ncu's speed-of-light percentages
  # name each kernel's limiter (scripts/kernel_times.py); where this ncu lacks a
  # metric, time alone.
  profile_run() {  # PRESET:DTYPE:BATCH[:OPTS]
    local ncu path csv preset dtype batch opts metrics steps=${PROFILE_STEPS:-2}
    IFS=: read -r preset dtype batch opts <<<"$1"
    local what=(--output-len $((steps + 1)) --profile-steps "$steps") per=(--steps "$steps")
    [[ "+$opts+" == *+prefill+* ]] && what=(--output-len 1 --profile-prefill) per=()
    local quant=()
    [[ "+$opts+" == *+fp8+* ]] && quant=(--quantization fp8)
    ncu=$(find_ncu) || { echo "no ncu"; return 1; }
    path=$(synth_model "$preset" "$dtype" "${PROFILE_LAYERS:-2}")
    csv=$LOGS/ncu-${1//[:+]/-}.csv
    metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
    metrics+=,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed
    for m in "$metrics" gpu__time_duration.sum; do
      timeout -k 10 "${PROFILE_TIMEOUT:-150}" "$ncu" --clock-control none --profile-from-start off --metrics "$m" \
        --csv --page raw --print-units base \
        "$MINFER" bench latency "$path" --device cuda --enforce-eager --batch "${batch:-1}" --input-len 512 \
        --repetitions 1 --warmup 0 "${what[@]}" "${quant[@]}" >"$csv" && break
      echo "ncu failed with --metrics $m"
    done
    python3 scripts/kernel_times.py "$csv" "${per[@]}"
  }
  for run in ${PROFILE_RUNS:-$PROFILE_TABLE_RUNS}; do
    run_phase "profile-${run//[:+]/-}" profile_run "$run"
  done
fi
if ((DO_LADDER)); then
  run_phase ladder ladder
fi
if ((DO_DEV)); then
  run_phase dev dev_programs
fi
if ((DO_MEMCHECK)); then
  if sanitizer=$(find_sanitizer); then
    run_phase memcheck "$sanitizer" --tool memcheck --leak-check no --error-exitcode 3 \
      "$BIN/minfer_gpu_ops" "${OPS_ARGS[@]}"
  else
    TABLE+=("memcheck        -    FAIL (no compute-sanitizer)"); FAILED=1
  fi
fi
if ((DO_RACECHECK)); then
  if sanitizer=$(find_sanitizer); then
    run_phase racecheck racecheck_ours "$sanitizer"
  else
    TABLE+=("racecheck       -    FAIL (no compute-sanitizer)"); FAILED=1
  fi
fi
finish
