#!/usr/bin/env bash
# llama.cpp's matmul kernels beside ours, on the GPU: ggml's test-backend-ops in
# perf mode runs MUL_MAT of a 4096 x 14336 weight (Llama-3-8B's down projection)
# by 1 to 8 and 512 activation rows, in every ggml type, and prints µs and GB/s a
# run. minfer_dev_k_quant_gemv and minfer_dev_q8_0_gemv (gpu.sh --dev) time our
# GEMVs on the same shape ("down"). ggml is the tensor library inside llama.cpp
# (github.com/ggml-org/ggml; its ggml-cuda is llama.cpp's CUDA backend).
#
#   scripts/ggml-ops-bench.sh build GGML_DIR     test-backend-ops for Hopper under
#                                                GGML_DIR/build-cuda (no GPU needed; about
#                                                15 minutes on 2 cores; flash attention off)
#   scripts/ggml-ops-bench.sh run BINARY [N]     the MUL_MAT cases of N rows (default 1) for
#                                                bf16, f16, q8_0, q6_K and q4_K, on CUDA0
set -euo pipefail
usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -ge 2 ] || usage
case "$1" in
  build)
    dir=$(cd "$2" && pwd)
    cmake -S "$dir" -B "$dir/build-cuda" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90a -DGGML_CUDA_FA=OFF -DGGML_CUDA_NCCL=OFF -DGGML_BUILD_TESTS=ON \
      -DGGML_BUILD_EXAMPLES=OFF -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF >/dev/null
    ninja -C "$dir/build-cuda" test-backend-ops
    echo "$dir/build-cuda/bin/test-backend-ops ($(git -C "$dir" describe --tags --always 2>/dev/null || echo '?'))"
    ;;
  run)
    bin=$2 rows=${3:-1}
    [ -x "$bin" ] || { echo "ggml-ops-bench.sh: no executable $bin" >&2; exit 2; }
    echo "ggml test-backend-ops perf, MUL_MAT m=4096 n=$rows k=14336 (the weight is m x k), $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
    # The types of the files minfer's tables run; the escape codes of its colours removed.
    "$bin" perf -o MUL_MAT -b CUDA0 -p "n=$rows," 2>&1 | sed 's/\x1b\[[0-9;]*m//g' |
      grep -E 'type_a=(bf16|f16|q8_0|q6_K|q4_K),type_b=f32' || { echo "ggml-ops-bench.sh: no MUL_MAT case ran" >&2; exit 1; }
    ;;
  *) usage ;;
esac
