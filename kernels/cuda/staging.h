// A device buffer and its pinned host twin, for arrays the host fills each
// step and sends in one asynchronous copy (the step plan, the sampling rows).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

#include "kernels/cuda/cuda_check.h"

namespace minfer::cuda {

// Grows both buffers to at least `bytes` (doubling, 64 KiB at least) after the
// stream has drained, since an earlier copy or kernel may still read them.
// Returns false when they were big enough.
template <class T>
bool grow_staging(T*& dev, T*& host, size_t& capacity, size_t bytes, cudaStream_t stream) {
    if (bytes <= capacity) return false;
    const size_t grown = std::max({bytes, 2 * capacity, size_t(64) << 10});
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaFree(dev));
    CUDA_CHECK(cudaFreeHost(host));
    dev = nullptr;
    host = nullptr;
    capacity = 0;
    CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dev), grown));
    CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&host), grown));
    capacity = grown;
    return true;
}

}  // namespace minfer::cuda
