#!/usr/bin/env bash
# Runs HERE (Debian 12, with network): gathers into .gpu/ (git-ignored) what the
# GPU machine lacks, so that scripts/gpu.sh can build and test there offline.
#
#   scripts/gpu-bundle.sh [--check] [--prebuilt] [--ggml DIR]
#
#   (always)     .gpu/debs: the .deb files of our build dependencies (apt-get download),
#                .gpu/reference: llama2.c's greedy reference (../shared does not travel)
#   --check      proves the bundle is enough: unpacks it and configures and builds
#                through scripts/gpu.sh against that prefix alone, with this system's
#                copies of the same packages hidden in a private mount namespace, then
#                runs `minfer run` on the bundled model with the unpacked libraries
#   --prebuilt   also builds here (portable flags) and carries the binaries (compressed:
#                .gpu/bin.tar.xz the engine, its tests and the ladder; .gpu/dev.tar.xz the
#                kernel experiments) and the non-system shared libraries they load (.gpu/lib;
#                Open MPI's too: the binaries link it, though one process never starts it)
#                (then: bash scripts/gpu.sh --prebuilt --test; carry dev.tar.xz and .gpu/lib
#                for gpu.sh --prebuilt --dev)
#   --ggml DIR   with --prebuilt: also llama.cpp's kernels, ggml's test-backend-ops built from
#                the checkout DIR (scripts/ggml-ops-bench.sh), .gpu/ggml-test-backend-ops.xz
#                (24 MB), for gpu.sh --prebuilt --dev
#
# On the GPU machine, through the device tool with carry [".gpu"]:
#   bash scripts/gpu.sh --build --test
set -euo pipefail
cd "$(dirname "$0")/.."

# Headers, CMake configs and .pc files, the shared libraries they name, and
# pkg-config itself (the GPU machine may have none).
PACKAGES=(
  libsentencepiece-dev libsentencepiece0
  libpcre2-dev libpcre2-8-0 libutf8proc-dev libutf8proc2   # tokenizers: only libpcre2-8.pc is used
  libcxxopts-dev doctest-dev
  libboost1.81-dev libboost-json1.81-dev libboost-json1.81.0
  libboost-container1.81-dev libboost-container1.81.0   # Boost::json's CMake config links Boost::container
  libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
  libxxhash-dev                                         # header-only (XXH_INLINE_ALL): no libxxhash0
  libcmark-gfm-dev libcmark-gfm0.29.0.gfm.6 libcmark-gfm-extensions-dev libcmark-gfm-extensions0.29.0.gfm.6   # the book
  pkgconf pkgconf-bin libpkgconf3
  zlib1g-dev                                            # the book's gzip (zlib1g itself is everywhere)
)
CHECK=0 PREBUILT=0 GGML=""
while [ $# -gt 0 ]; do
  a=$1
  shift
  case "$a" in
    --check) CHECK=1 ;;
    --prebuilt) PREBUILT=1 ;;
    --ggml) GGML=${1:?--ggml needs a ggml checkout}; shift ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "gpu-bundle.sh: unknown option $a" >&2; exit 2 ;;
  esac
done

rm -rf .gpu/debs .gpu/reference
mkdir -p .gpu/debs .gpu/reference
(cd .gpu/debs && apt-get download -q -o APT::Sandbox::User=root "${PACKAGES[@]}")
cp ../shared/reference/stories260K/run_c_greedy.json .gpu/reference/
echo "gpu-bundle: $(ls .gpu/debs | wc -l) packages, $(du -sh .gpu/debs | cut -f1) in .gpu/debs"

if ((CHECK)); then
  work=/tmp/minfer-gpu-check
  rm -rf "$work" && mkdir -p "$work"
  # Hide every file of these packages that is installed here (the boost headers as a
  # whole directory), so that only the unpacked bundle can satisfy the build.
  hide=$work/hide.sh
  {
    echo 'set -e; mount --make-rprivate /'
    echo '[ -d /usr/include/boost ] && mount -t tmpfs none /usr/include/boost'
    for p in "${PACKAGES[@]}"; do
      { dpkg -L "$p" 2>/dev/null || true; } | while read -r f; do
        if [ -f "$f" ] && [[ $f != /usr/include/boost/* && $f != /usr/share/doc/* ]]; then
          echo "mount --bind /dev/null '$f'"
        fi
      done
    done
  } >"$hide"
  echo "gpu-bundle --check: hiding $(grep -c /dev/null "$hide") installed files and /usr/include/boost"
  unshare -m bash -c "source $hide
    bash scripts/gpu.sh --build --deps $work/deps --build-dir $work/build &&
    echo '=== minfer run with the unpacked libraries' &&
    LD_LIBRARY_PATH=$work/deps/usr/lib/x86_64-linux-gnu $work/build/minfer run models/stories260K.gguf \
      -p 'Once upon a time' -n 24 --temp 0 &&
    echo && echo 'libraries it loads:' &&
    LD_LIBRARY_PATH=$work/deps/usr/lib/x86_64-linux-gnu ldd $work/build/tests/gpu/minfer_gpu_ops |
      grep -E 'sentencepiece|boost|fmt|spdlog|cuda|cublas'"
  echo "gpu-bundle --check: the bundle builds alone"
fi

if ((PREBUILT)); then
  build=/tmp/minfer-gpu-prebuilt
  # MINFER_NATIVE=OFF: the GPU machine's processor may lack this one's instructions.
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMINFER_CUDA=ON -DMINFER_NATIVE=OFF >/dev/null
  ninja -C "$build" minfer minfer_gpu_ops minfer_gpu_model minfer_ladder_exercises minfer_ladder_matmul minfer_dev_q8_0_gemv minfer_dev_k_quant_gemv minfer_dev_quant_gemm
  rm -rf .gpu/bin .gpu/lib
  mkdir -p .gpu/bin .gpu/lib
  cp "$build/minfer" "$build/tests/gpu/minfer_gpu_ops" "$build/tests/gpu/minfer_gpu_model" .gpu/bin/
  # Chapter 2's ladder (gpu.sh --ladder): two small programs, the CUDA runtime linked statically.
  cp "$build/kernels/cuda/ladder/minfer_ladder_exercises" "$build/kernels/cuda/ladder/minfer_ladder_matmul" .gpu/bin/
  # The kernels' experiments (gpu.sh --dev).
  cp "$build/kernels/cuda/dev/minfer_dev_q8_0_gemv" "$build/kernels/cuda/dev/minfer_dev_k_quant_gemv" \
    "$build/kernels/cuda/dev/minfer_dev_quant_gemm" .gpu/bin/
  # The shared libraries of our dependencies; the C/C++ runtime and CUDA's are there already.
  for bin in .gpu/bin/*; do
    ldd "$bin" | awk '/=> \// { print $3 }'
  done | sort -u | grep -E '/lib(sentencepiece|boost_|fmt|spdlog|pcre2|utf8proc|cmark-gfm|mpi|open-rte|open-pal|hwloc|event_|udev)' | while read -r lib; do
    cp -L "$lib" .gpu/lib/
  done
  echo "gpu-bundle: prebuilt $(ls .gpu/bin | tr '\n' ' ')and $(ls .gpu/lib | tr '\n' ' ')"
  # Three binaries of ~25 MB each would leave little of the 64 MiB a call carries:
  # they travel compressed, and gpu.sh --prebuilt unpacks them.
  # The kernel experiments travel apart, so that a call running the engine (with an
  # earlier build beside it, say) need not carry them.
  tar cJf .gpu/dev.tar.xz -C .gpu bin/minfer_dev_q8_0_gemv bin/minfer_dev_k_quant_gemv bin/minfer_dev_quant_gemm
  rm .gpu/bin/minfer_dev_*
  echo "gpu-bundle: .gpu/dev.tar.xz $(du -sh .gpu/dev.tar.xz | cut -f1)"
  if [ -n "$GGML" ]; then
    ggml_bin=$(scripts/ggml-ops-bench.sh build "$GGML" | tail -1 | cut -d' ' -f1)
    xz -T0 -c "$ggml_bin" > .gpu/ggml-test-backend-ops.xz
    echo "gpu-bundle: .gpu/ggml-test-backend-ops.xz $(du -sh .gpu/ggml-test-backend-ops.xz | cut -f1)"
  fi
  tar cJf .gpu/bin.tar.xz -C .gpu bin && rm -rf .gpu/bin
  echo "gpu-bundle: .gpu/bin.tar.xz $(du -sh .gpu/bin.tar.xz | cut -f1)"
fi
echo "gpu-bundle: .gpu holds $(du -sh .gpu | cut -f1); the working tree travels with it (limit 64 MiB)"
