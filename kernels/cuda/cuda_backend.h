// The CUDA backend: the Backend contract of kernels/backend.h on one GPU.
// Plain C++ (no CUDA headers), so that any target of minfer_core can include it
// when the library is built with MINFER_HAVE_CUDA.
#pragma once

#include <memory>
#include <string>

#include "kernels/backend.h"

namespace minfer {

// Throws std::runtime_error when there is no such device or CUDA cannot start.
// options.quantization FP8: the layers' dense weights become E4M3 at pack_weight.
std::unique_ptr<Backend> make_cuda_backend(int device = 0, const BackendOptions& options = {});

// One line about the device and the CUDA versions, e.g. for a test's header.
std::string cuda_device_summary(int device = 0);

// "2 GPUs, the first: NVIDIA H200, ..." or "no device answers (why)"; never throws.
std::string cuda_status();

// The GPU of this rank: world.local_rank % the device count (throws when
// there is no GPU).
int cuda_device_for(const World& world);

}  // namespace minfer
