// DeviceBuffer: device memory that only grows. ensure(bytes, stream) waits for
// the stream (no kernel in flight may still use the old memory), frees it and
// allocates `bytes` when they are more than it holds, and does nothing
// otherwise, so a step that fits allocates nothing (a warmed-up shape can be
// captured in a CUDA graph). The destructor frees it without throwing.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "kernels/cuda/cuda_check.h"

namespace minfer::cuda {

class DeviceBuffer {
public:
    DeviceBuffer() = default;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    DeviceBuffer(DeviceBuffer&& o) noexcept
        : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
        if (this != &o) {
            cudaFree(ptr_);
            ptr_ = std::exchange(o.ptr_, nullptr);
            bytes_ = std::exchange(o.bytes_, 0);
        }
        return *this;
    }
    ~DeviceBuffer() { cudaFree(ptr_); }

    // Grows to at least `bytes`; true when it reallocated (the address changed).
    bool ensure(size_t bytes, cudaStream_t stream) {
        if (bytes <= bytes_) return false;
        CUDA_CHECK(cudaStreamSynchronize(stream));
        release();
        CUDA_CHECK(cudaMalloc(&ptr_, bytes));
        bytes_ = bytes;
        return true;
    }

    // Frees it now (the caller has made sure nothing in flight uses it).
    void release() {
        CUDA_CHECK(cudaFree(ptr_));
        ptr_ = nullptr;
        bytes_ = 0;
    }

    void* get() const { return ptr_; }
    template <class T>
    T* as() const { return static_cast<T*>(ptr_); }
    size_t bytes() const { return bytes_; }

private:
    void* ptr_ = nullptr;
    size_t bytes_ = 0;
};

}  // namespace minfer::cuda
