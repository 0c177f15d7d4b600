#!/usr/bin/env bash
# Installs the Debian packages minfer needs and builds it into build/.
# Usage: ./scripts/setup.sh [extra cmake -D options]
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libsentencepiece-dev libcxxopts-dev doctest-dev
  libboost1.81-dev libboost-json1.81-dev libspdlog-dev libfmt-dev
  libxxhash-dev                     # header-only use: prefix-cache block hashes
  libopenmpi-dev openmpi-bin        # tensor parallelism: MPI between ranks (mpirun), NCCL comes with CUDA
  libpcre2-dev libutf8proc-dev      # BPE pre-tokenizers: Unicode regexes, categories, NFC
  python3-jinja2                    # the oracle for chat templates
  clang libclang-rt-14-dev          # libFuzzer target for the GGUF parser
  python3 python3-venv              # test oracles live in a virtual environment
  libcmark-gfm-dev libcmark-gfm-extensions-dev   # the book: Markdown to HTML
  universal-ctags                   # the book: source links resolved to line ranges
  zlib1g-dev                        # the book: gzip for text answers
  libjs-katex libjs-highlight.js    # the book: math and code highlighting, served from /usr/share/javascript
  chromium                          # the book's figures tested headless (with PyPI playwright)
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j"$(nproc)"
echo "setup: built build/minfer"
