#!/usr/bin/env bash
# Real GGUF models are larger than what one device call may carry (64 MiB with
# the working tree), so they travel in parts, one call each, to a machine that
# stays warm between the calls.
#
#   here:  scripts/gpu-model-parts.sh split NAME     (NAME as in scripts/get-model.sh)
#          -> .gpu-parts/FILE.partNN and FILE.sha256; PART_MIB (default 56) fits one
#             part beside the 4 MiB working tree; PART_MIB=40 leaves room for .gpu too
#   there: scripts/gpu-model-parts.sh receive        (each call, carry [".gpu-parts/FILE.partNN"]
#          and for the first call also ".gpu-parts/FILE.sha256"; the parts wait in /tmp)
#          -> keeps the carried parts in /tmp/minfer-models/parts; once all are there,
#             /tmp/minfer-models/real/FILE, checked against its SHA-256
# Then `bash scripts/gpu.sh --real` compares the GPU with the CPU on every model in
# /tmp/minfer-models/real.
set -euo pipefail
cd "$(dirname "$0")/.."
PARTS=.gpu-parts
STORE=/tmp/minfer-models

case "${1:-}" in
  split)
    [ -n "${2:-}" ] || { echo "usage: $0 split NAME" >&2; exit 2; }
    path=$(scripts/get-model.sh "$2" --print-path)
    file=$(basename "$path")
    mkdir -p "$PARTS"
    rm -f "$PARTS/$file".part*
    split -b "${PART_MIB:-56}M" -d -a 2 "$path" "$PARTS/$file.part"
    (cd "$(dirname "$path")" && sha256sum "$file") > "$PARTS/$file.sha256"
    ls -l "$PARTS" | grep -F "$file"
    ;;
  receive)
    mkdir -p "$STORE/parts" "$STORE/real"
    [ -d "$PARTS" ] && cp -n "$PARTS"/* "$STORE/parts/" 2>/dev/null || true
    for sum in "$STORE"/parts/*.sha256; do
      [ -e "$sum" ] || continue
      file=$(awk '{print $2}' "$sum")
      [ -f "$STORE/real/$file" ] && { echo "have $file"; continue; }
      compgen -G "$STORE/parts/$file.part*" >/dev/null || { echo "$file: no parts yet"; continue; }
      cat "$STORE/parts/$file".part* > "$STORE/real/$file.tmp"
      if (cd "$STORE/real" && sed "s/ $file\$/ $file.tmp/" "$sum" | sha256sum -c --quiet >/dev/null 2>&1); then
        mv "$STORE/real/$file.tmp" "$STORE/real/$file"
        echo "assembled $file"
      else
        rm -f "$STORE/real/$file.tmp"
        echo "$file: $(ls "$STORE/parts/$file".part* 2>/dev/null | wc -l) parts so far"
      fi
    done
    ;;
  *)
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
