#!/usr/bin/env bash
# Writes the data of the book's structured-mask figure: the grammar minfer
# compiles from book/figures/data/pet.schema.json, as `minfer grammar export`
# prints it (rules, alternatives, symbols and code-point classes).
#
#   scripts/book-grammar.sh [OUTPUT]    (default book/figures/data/grammar-pet.json)
#
# tests/integration/test_book_figures.py re-runs this script and checks that
# the committed file is still what the compiler makes. MINFER_BIN picks the binary.
set -euo pipefail

cd "$(dirname "$0")/.."
OUTPUT=${1:-book/figures/data/grammar-pet.json}
MINFER_BIN=${MINFER_BIN:-build/minfer}
"$MINFER_BIN" grammar export --json-schema book/figures/data/pet.schema.json > "$OUTPUT"
