// What every ladder program shares: random inputs, a relative-error norm
// against a CPU twin, and a timer that reports the median of N launches after
// warm-up. These programs are experiments in the llm.c dev/cuda style, not
// engine code: each file shows one idea, version by version, and measures it.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "kernels/cuda/cuda_check.h"

namespace ladder {

// Measured on our H200 (device-to-device copy, kernels/cuda/PERFLOG.md): the
// bandwidth a memory-bound kernel is judged against.
constexpr double kCopyGBs = 4190.0;
// Measured bf16 cuBLASLt GEMM on the same H200: the compute ceiling.
constexpr double kBf16TFlops = 749.0;

// Fresh random data, never zeros: a kernel that writes nothing, or reads the
// wrong element, then cannot pass by accident.
inline void fill_uniform(std::vector<float>& v, float lo, float hi, uint32_t seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    for (float& x : v) x = dist(gen);
}

// ||got - ref||_2 / ||ref||_2: one number per output, independent of its scale.
inline double rel_error(const float* got, const double* ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; ++i) {
        const double d = double(got[i]) - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return std::sqrt(num / (den > 0 ? den : 1));
}
inline double rel_error(const float* got, const float* ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; ++i) {
        const double d = double(got[i]) - double(ref[i]);
        num += d * d;
        den += double(ref[i]) * double(ref[i]);
    }
    return std::sqrt(num / (den > 0 ? den : 1));
}

// Median milliseconds of `runs` launches after three untimed warm-up ones; each launch
// is bracketed by its own pair of events, so one slow outlier cannot move the result.
// (std::function costs the host a few nanoseconds a call; the events time only the GPU.)
inline float median_ms(const std::function<void()>& launch, int runs) {
    const int warmup = 3;
    for (int i = 0; i < warmup; ++i) launch();
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaDeviceSynchronize());
    cudaEvent_t a, b;
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    std::vector<float> ms(runs);
    for (int i = 0; i < runs; ++i) {
        CUDA_CHECK(cudaEventRecord(a));
        launch();
        CUDA_CHECK(cudaEventRecord(b));
        CUDA_CHECK(cudaEventSynchronize(b));
        CUDA_CHECK(cudaEventElapsedTime(&ms[i], a, b));
    }
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaEventDestroy(a));
    CUDA_CHECK(cudaEventDestroy(b));
    std::sort(ms.begin(), ms.end());
    return ms[runs / 2];
}

// The one flag of the programs that take no other, --runs N: N (fallback when
// absent), or -1 after the usage line for anything else (a count of 0 or less too).
inline int runs_flag(int argc, char** argv, int fallback) {
    int runs = fallback;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc && (runs = std::atoi(argv[i + 1])) > 0) {
            ++i;
            continue;
        }
        std::fprintf(stderr, "usage: %s [--runs N], N > 0\n", argv[0]);
        return -1;
    }
    return runs;
}

// One line a version: name, error, verdict, time and bandwidth against the copy ceiling.
inline bool report_bw(const char* name, double err, double threshold, float ms, double bytes) {
    const bool ok = err <= threshold;
    const double gbs = bytes / (ms * 1e-3) / 1e9;
    std::printf("%-34s rel_err %.2e %s  %9.3f ms  %8.1f GB/s  %5.1f%% of %.0f GB/s\n", name, err,
                ok ? "PASS" : "FAIL", ms, gbs, 100.0 * gbs / kCopyGBs, kCopyGBs);
    return ok;
}

// Device buffer owned for the program's lifetime (freed at exit is enough here,
// but a destructor keeps the code honest).
template <class T>
struct DeviceArray {
    T* p = nullptr;
    size_t n = 0;
    explicit DeviceArray(size_t count) : n(count) { CUDA_CHECK(cudaMalloc(&p, count * sizeof(T))); }
    ~DeviceArray() { cudaFree(p); }
    DeviceArray(const DeviceArray&) = delete;
    DeviceArray& operator=(const DeviceArray&) = delete;
    void upload(const std::vector<T>& h) { CUDA_CHECK(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice)); }
    std::vector<T> download() const {
        std::vector<T> h(n);
        CUDA_CHECK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
        return h;
    }
};

inline int sm_count() {
    int dev = 0, sms = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    return sms;
}

inline void print_device() {
    cudaDeviceProp prop{};
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    std::printf("device: %s, %d SMs, %.1f GiB\n", prop.name, prop.multiProcessorCount,
                double(prop.totalGlobalMem) / (1 << 30));
}

}  // namespace ladder
