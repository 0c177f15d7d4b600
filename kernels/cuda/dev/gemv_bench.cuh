// What the GEMV experiments share: Llama-3-8B's decode shapes, device copies of
// the weights to cycle through (so that they come from memory, not L2), one
// check-and-time step a version, and main's frame. Built on the ladder's
// timer, error norm and report line (kernels/cuda/ladder/common.cuh).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ladder/common.cuh"

namespace dev {

struct Shape {
    const char* name;
    int32_t n, k;
};

// How many copies of `bytes` cycle through 4x the L2 (60 MB on an H200).
inline int copies_for(size_t bytes) { return int(std::max<size_t>(1, (size_t(240) << 20) / bytes + 1)); }

// `count` device copies of `bytes` host bytes.
class DeviceCopies {
public:
    DeviceCopies(const void* host, size_t bytes, int count) : p_(static_cast<size_t>(count), nullptr) {
        for (uint8_t*& p : p_) {
            CUDA_CHECK(cudaMalloc(&p, bytes));
            CUDA_CHECK(cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice));
        }
    }
    ~DeviceCopies() {
        for (uint8_t* p : p_) cudaFree(p);
    }
    DeviceCopies(const DeviceCopies&) = delete;
    DeviceCopies& operator=(const DeviceCopies&) = delete;
    uint8_t* operator[](int i) const { return p_[size_t(i)]; }

private:
    std::vector<uint8_t*> p_;
};

// One version of a shape: launch(i) writes out (n floats) from copy i of the
// weights. Its first output, the buffer poisoned with NaNs beforehand so that
// an unwritten element fails, is checked against ref; then it is timed cycling
// through the copies, and reported as the ladder reports (GB/s of `bytes`).
class VersionCheck {
public:
    VersionCheck(float* out, const std::vector<double>& ref, int copies, int runs, double bytes)
        : out_(out), ref_(ref), got_(ref.size()), copies_(copies), runs_(runs), bytes_(bytes) {}
    void operator()(const char* name, double threshold, const std::function<void(int)>& launch) {
        CUDA_CHECK(cudaMemset(out_, 0xff, got_.size() * sizeof(float)));
        launch(0);
        CUDA_CHECK_LAUNCH();
        CUDA_CHECK(cudaMemcpy(got_.data(), out_, got_.size() * sizeof(float), cudaMemcpyDeviceToHost));
        const double err = ladder::rel_error(got_.data(), ref_.data(), got_.size());
        int i = 0;
        const float ms = ladder::median_ms([&] { launch(i++ % copies_); }, runs_);
        ok_ &= ladder::report_bw(name, err, threshold, ms, bytes_);
    }
    bool ok() const { return ok_; }

private:
    float* out_;
    const std::vector<double>& ref_;
    std::vector<float> got_;
    int copies_, runs_;
    double bytes_;
    bool ok_ = true;
};

// main: --runs, the device, `header`, run_shape over every shape, the verdict.
inline int run_all(int argc, char** argv, const char* header, const std::vector<Shape>& shapes,
                   const std::function<bool(const Shape&, int)>& run_shape) {
    const int runs = ladder::runs_flag(argc, argv, 30);
    if (runs < 0) return 2;
    try {
        ladder::print_device();
        std::printf("median of %d launches after 3 warm-up; %s\n", runs, header);
        bool ok = true;
        for (const Shape& s : shapes) ok &= run_shape(s, runs);
        std::printf("\n%s\n", ok ? "all versions PASS" : "some version FAILED");
        return ok ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}

}  // namespace dev
