// The GPU harness's answer to "is there a GPU?": ctest registers minfer_gpu_ops
// and minfer_gpu_model (label gpu) with SKIP_RETURN_CODE kSkipNoGpu, so a
// machine whose CUDA runtime finds no device counts them as skipped, not failed.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>

namespace minfer::gpu_test {

constexpr int kSkipNoGpu = 77;  // tests/gpu/CMakeLists.txt: SKIP_RETURN_CODE

// True when the CUDA runtime answers with at least one device; otherwise says
// why on stderr.
inline bool cuda_device_answers(const char* program) {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        std::fprintf(stderr, "%s: no CUDA device (%s): skipped\n", program,
                     e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return false;
    }
    return true;
}

}  // namespace minfer::gpu_test
