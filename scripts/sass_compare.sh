#!/usr/bin/env bash
# Compares the SASS of two builds' CUDA objects kernel by kernel (no GPU needed).
#   scripts/sass_compare.sh BUILD_A BUILD_B
# Each build's kernels/cuda/*.cu.o (under CMakeFiles/minfer_kernels.dir) is
# dumped with cuobjdump -sass and cut into one file per kernel, named by its
# mangled name. Addresses (/*0123*/), the encoding comments (/* 0x... */) and
# the per-file hash in an anonymous namespace's mangled name
# (_GLOBAL__N__<hash>_<file>) are stripped, so moving a kernel to another .cu
# file changes nothing. Lists the kernels only in A, only in B, and those whose
# SASS differs; exits 1 when any do.
set -euo pipefail
a=${1:?build A}; b=${2:?build B}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
norm_name() { sed -E 's/_GLOBAL__N__[0-9A-Za-z]+_[0-9A-Za-z_]+_[0-9a-f]+/_GLOBAL__N_/g; s/_GLOBAL__N__[0-9a-f_]+[A-Za-z0-9_]*cu_[0-9a-f]+/_GLOBAL__N_/g'; }
split_build() {
    local build=$1 out=$2
    mkdir -p "$out"
    for o in "$build"/CMakeFiles/minfer_kernels.dir/kernels/cuda/*.cu.o; do
        cuobjdump -sass "$o" | awk -v out="$out" '
            /Function : / { name = $3; next }
            /\.{4,}/ { name = ""; next }
            name != "" { print > (out "/" name ".raw") }'
    done
    for f in "$out"/*.raw; do
        local n; n=$(basename "$f" .raw | norm_name)
        sed -E 's#/\*[0-9a-f]{4,}\*/##g; s#/\* 0x[0-9a-f]+ \*/##g; s/[[:space:]]+$//; /^[[:space:]]*$/d' "$f" | norm_name > "$out/$n.sass"
        rm "$f"
    done
}
split_build "$a" "$work/a"
split_build "$b" "$work/b"
status=0
(cd "$work/a" && ls *.sass) | sort > "$work/la"
(cd "$work/b" && ls *.sass) | sort > "$work/lb"
echo "kernels: $(wc -l < "$work/la") in A, $(wc -l < "$work/lb") in B"
for k in $(comm -23 "$work/la" "$work/lb"); do echo "only in A: ${k%.sass}"; status=1; done
for k in $(comm -13 "$work/la" "$work/lb"); do echo "only in B: ${k%.sass}"; status=1; done
same=0
for k in $(comm -12 "$work/la" "$work/lb"); do
    if cmp -s "$work/a/$k" "$work/b/$k"; then same=$((same + 1)); else echo "differs: ${k%.sass}"; status=1; fi
done
echo "identical: $same"
exit $status
