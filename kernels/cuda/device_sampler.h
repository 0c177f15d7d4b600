// The CUDA backend's sampler: packs a step's SamplingRows into one upload and
// runs sampling_device.cu's kernels, so that only the sampled ids come back.
// Plain C++ (CUDA runtime types only), included by cuda_backend.cpp.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/sampling.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_buffer.h"

namespace minfer::cuda {

class DeviceSampler {
public:
    explicit DeviceSampler(cudaStream_t stream) : stream_(stream) {}
    ~DeviceSampler();
    DeviceSampler(const DeviceSampler&) = delete;
    DeviceSampler& operator=(const DeviceSampler&) = delete;

    // Backend::sample on the device: the logits are modified in place; out_ids
    // (host memory) receives one id per row. Returns after the ids arrived,
    // with the bytes uploaded (the download is rows * 4 bytes).
    size_t sample(float* logits, int32_t vocab, std::span<const SamplingRow> rows, int32_t* out_ids);

private:
    size_t pack(int32_t vocab, std::span<const SamplingRow> rows, int32_t chunk);  // returns the bytes uploaded
    void grow_scratch(int32_t chunk, int32_t vocab);

    cudaStream_t stream_;
    // The packed rows: built in host vectors, staged through pinned memory.
    std::vector<SampleRowParams> params_;
    std::vector<SampleTokenEntry> entries_;
    std::vector<float> biases_;
    std::vector<uint32_t> masks_;
    std::vector<int32_t> sampled_;
    std::vector<int32_t> offsets_;
    std::vector<const float*> draft_q_;  // the drafts' q rows to send (vocab floats each), in draft_q_row order
    std::vector<int32_t> slot_;  // per token id: its entry in the current row, or -1
    std::vector<std::pair<int32_t, float>> row_biases_;
    std::vector<int32_t> touched_;
    std::vector<int32_t> counts_;  // output count per entry of the current row
    char* host_ = nullptr;  // pinned
    char* dev_ = nullptr;
    size_t capacity_ = 0;
    DeviceSampling dev_sampling_;

    DeviceBuffer keys_[2], vals_[2], temp_;  // the sort's arrays and CUB's temporary storage
    SampleScratch scratch_;                  // their addresses, as the launches take them
    size_t scratch_elems_ = 0;               // of each of the four arrays
    DeviceBuffer ids_dev_;                   // the ids and the argmax's partials
};

}  // namespace minfer::cuda
