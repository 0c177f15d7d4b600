#!/usr/bin/env bash
# Compares the SASS of two builds' CUDA objects kernel by kernel (no GPU needed).
#   scripts/sass_compare.sh BUILD_A BUILD_B
# Each build's kernels/cuda/*.cu.o (under CMakeFiles/minfer_kernels.dir) is
# dumped with cuobjdump -sass and cut into one file per kernel, named by its
# mangled name. Instruction addresses (/*0120*/), the padding between an
# instruction and its encoding (cuobjdump sizes it by the object's longest
# line, so it moves with the file's contents) and the per-file hash in an
# anonymous namespace's mangled name (_GLOBAL__N__<hash>_<file>_cu_<hash>) are
# stripped, so moving a kernel to another .cu file changes nothing; the
# encodings (/* 0x... */, scheduling bits included) are compared. A kernel that
# differs is compared again without them ("differs (encodings only)" when the
# instructions alone agree). Lists the kernels only in A, only in B, and those
# whose SASS differs; exits 1 when any do.
set -euo pipefail
export PATH="$PATH:/usr/local/cuda/bin"  # cuobjdump and nvdisasm (pip: nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm)
a=${1:?build A}; b=${2:?build B}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
# 45_GLOBAL__N__c69a51f4_12_attention_cu_e9f6e213 -> 11_GLOBAL__N_ (the length prefix too)
norm_name() { sed -E 's/[0-9]+_GLOBAL__N__[0-9a-f]{8}_[0-9]+_[A-Za-z0-9_]*_cu_[0-9a-f]{8}/11_GLOBAL__N_/g'; }
split_build() {
    local build=$1 out=$2 f
    mkdir -p "$out"
    for o in "$build"/CMakeFiles/minfer_kernels.dir/kernels/cuda/*.cu.o; do
        cuobjdump -sass "$o" | awk -v out="$out" '
            /Function : / { name = $3; next }
            /\.{4,}/ { name = ""; next }
            name != "" { print > (out "/" name ".raw") }'
    done
    for f in "$out"/*.raw; do
        local n; n=$(basename "$f" .raw | norm_name)
        sed -E 's#/\*[0-9a-f]{4,}\*/##g; s/[[:space:]]+/ /g; s/ $//; /^ ?$/d' "$f" | norm_name > "$out/$n.sass"
        sed -E 's#/\* 0x[0-9a-f]+ \*/##g; s/ $//; /^ ?$/d' "$out/$n.sass" > "$out/$n.ins"
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
    if cmp -s "$work/a/$k" "$work/b/$k"; then
        same=$((same + 1))
    elif cmp -s "$work/a/${k%.sass}.ins" "$work/b/${k%.sass}.ins"; then
        echo "differs (encodings only): ${k%.sass}"; status=1
    else
        echo "differs: ${k%.sass} ($(diff "$work/a/${k%.sass}.ins" "$work/b/${k%.sass}.ins" | grep -c '^[<>]') lines)"; status=1
    fi
done
echo "identical: $same"
exit $status
