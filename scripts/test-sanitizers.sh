#!/usr/bin/env bash
# Builds minfer and the unit tests under the sanitizers (CUDA off) and runs the
# tests that exercise the engine thread and the HTTP server:
#
#   build-asan/  -fsanitize=address,undefined: every unit test (minfer_tests),
#                test_server.py, test_cli_errors.py and test_generate.py but its
#                byte-identical mixed workloads (pinned to the normal build's float
#                code: the instrumented build changes one logprob digit) and its
#                speculative runs (the unit tests run speculation's code here)
#   build-tsan/  -fsanitize=thread: test_server.py (the engine thread, the HTTP
#                server's threads and the CPU thread pool, through real requests)
#
# Both build at -O1 (the TSan build runs beside the ASan tests),
# with line tables only: about 15 minutes of CI's two cores for both.
#
#   scripts/test-sanitizers.sh [asan] [tsan]     (both when none is named)
#
# Every finding fails the run: the runtimes write their reports under
# build-*/sanitizer-logs/ (log_path), and a non-empty folder is a failure even
# when the process that found it was a server the test did not wait for.
# scripts/test.sh runs this after the main suite (the venv must exist).
set -euo pipefail
cd "$(dirname "$0")/.."

PY="$PWD/.venv/bin/python"
[ -x "$PY" ] || { echo "test-sanitizers.sh: no .venv (scripts/test.sh makes it)" >&2; exit 2; }
LAUNCHER=()
command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
kinds=("$@")
((${#kinds[@]})) || kinds=(asan tsan)

build() {  # build DIR SANITIZERS OPT TARGET...
  # -O1: the usual level for sanitizer builds (readable stacks, fast enough),
  # and half the compile time of -O3 on CI's two cores; -g1: line tables, all
  # a report's stack needs, for less compile time than full debug info.
  cmake -S . -B "$1" -DMINFER_CUDA=OFF -DMINFER_SANITIZE="$2" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$3 -g1" \
    -DMINFER_PYTHON="$PY" "${LAUNCHER[@]}" >/dev/null
  cmake --build "$1" -j"$(nproc)" --target "${@:4}"
}

step() { echo "test-sanitizers.sh: $1 at $SECONDS s"; }

checked() {  # checked LOGDIR COMMAND...: runs it; fails when it fails or left a report
  local logs=$1 rc=0
  shift
  "$@" || rc=$?
  if compgen -G "$logs/*" >/dev/null; then
    echo "test-sanitizers.sh: sanitizer reports in $logs:" >&2
    cat "$logs"/* >&2
    exit 1
  fi
  ((rc == 0)) || { echo "test-sanitizers.sh: failed ($rc): $*" >&2; exit 1; }
}

test_asan() {
  local logs="$PWD/build-asan/sanitizer-logs"
  rm -rf "$logs" && mkdir -p "$logs"
  export ASAN_OPTIONS="log_path=$logs/asan:detect_leaks=1:abort_on_error=0"
  export UBSAN_OPTIONS="log_path=$logs/ubsan:print_stacktrace=1:halt_on_error=1"
  # Not the quantized-models comparison: 77 s of float loops under ASan, the
  # same kernels the engine tests run here, on larger models; nor the
  # speculative chi-square tests (16,000 requests each, the code paths the
  # greedy speculation tests run); nor the thread pool's 20,000-job race
  # test (26 s here: a scheduling test, run in the plain build). Nor, of
  # generate's tests, the MoE model's workload (test_moe.cpp's engine test
  # runs its code here).
  checked "$logs" ./build-asan/tests/minfer_tests \
    -tce="quantized synthetic models stay close*,spec: sampled output*,parallel_for: a worker left out*"
  MINFER_BIN="$PWD/build-asan/minfer" checked "$logs" \
    "$PY" -m pytest -q -p no:cacheprovider tests/integration/test_server.py \
    tests/integration/test_cli_errors.py tests/integration/test_generate.py \
    -k "not byte_identical and not ngram and not draft and not moe_model"
  unset ASAN_OPTIONS UBSAN_OPTIONS
}

test_tsan() {
  local logs="$PWD/build-tsan/sanitizer-logs"
  rm -rf "$logs" && mkdir -p "$logs"
  export TSAN_OPTIONS="log_path=$logs/tsan:halt_on_error=0:second_deadlock_stack=1"
  MINFER_BIN="$PWD/build-tsan/minfer" checked "$logs" \
    "$PY" -m pytest -q -p no:cacheprovider tests/integration/test_server.py
  unset TSAN_OPTIONS
}

# TSan builds only the binary: test_server.py drives the engine thread, the HTTP
# server's threads and the CPU thread pool through real requests (the unit-test
# binary would add minutes of build and no thread of its own).
# -O1 for TSan: its build runs beside the ASan tests, so only its tests'
# time counts (226 s at -O0).
TSAN_OPT=-O1
want() { [[ " ${kinds[*]} " == *" $1 "* ]]; }
for k in "${kinds[@]}"; do
  [[ $k == asan || $k == tsan ]] || { echo "test-sanitizers.sh: unknown '$k' (asan, tsan)" >&2; exit 2; }
done
if want asan; then
  step "asan build"
  build build-asan address,undefined -O1 minfer minfer_tests
  step "asan tests"
  # The TSan build runs beside the ASan tests, which leave the cores half idle
  # (a server waiting on its client): CI's time, not its work, shrinks.
  if want tsan; then
    mkdir -p build-tsan
    build build-tsan thread "$TSAN_OPT" minfer >build-tsan/build.log 2>&1 &
    tsan_build=$!
  fi
  test_asan
fi
if want tsan; then
  if [ -n "${tsan_build:-}" ]; then
    wait "$tsan_build" || { cat build-tsan/build.log >&2; echo "test-sanitizers.sh: the TSan build failed" >&2; exit 1; }
  else
    build build-tsan thread "$TSAN_OPT" minfer
  fi
  step "tsan tests"
  test_tsan
fi
echo "test-sanitizers.sh: ${kinds[*]} clean after $SECONDS s"
