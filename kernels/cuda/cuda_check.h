// Error checking for CUDA calls: every runtime call and every launch is
// checked, and a failure throws std::runtime_error naming file:line, the call
// and CUDA's error string.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace minfer::cuda {

[[noreturn]] inline void throw_error(const char* call, const char* detail, const char* file, int line) {
    throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + call + ": " + detail);
}

}  // namespace minfer::cuda

// A call returning a status: anything but `ok` throws, with describe(status).
#define MINFER_CHECK_STATUS(call, ok, describe)                                        \
    do {                                                                               \
        const auto status_ = (call);                                                   \
        if (status_ != (ok))                                                           \
            ::minfer::cuda::throw_error(#call, describe(status_), __FILE__, __LINE__); \
    } while (0)

#define CUDA_CHECK(call) MINFER_CHECK_STATUS(call, cudaSuccess, cudaGetErrorString)

// After a <<<...>>> launch: a bad configuration shows up here; faults inside
// the kernel show up at the next synchronizing call.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
