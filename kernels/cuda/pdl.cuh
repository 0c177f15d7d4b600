// Programmatic dependent launch (Hopper). A decode step is a chain of small
// kernels, and between two of them the GPU would otherwise sit idle while the
// first drains and the second is launched. A kernel started with launch_pdl may
// be scheduled while the kernel before it in the stream is still running: as
// soon as every CTA of that kernel has started and called pdl_wait(), which
// lets the next kernel launch (griddepcontrol.launch_dependents) and then waits
// until the kernel before this one has finished and its writes are visible.
// Its CTAs then sit on free SM slots, ready, instead of being dispatched after
// the drain. So a kernel must call pdl_wait() before it reads anything that an
// earlier kernel wrote and before it writes anything, and it calls it before
// any early return, so that it cannot finish before its predecessor does
// (which makes the order transitive: the kernel after it, waiting for it, waits
// for everything before). What no kernel writes, a matrix's weights, it may
// read before: the GEMVs issue their first weight loads first, and those are in
// flight while the kernels before them finish. MINFER_PDL=0 (CudaOptions::pdl,
// which the backend hands to set_pdl_enabled when it is created) launches them
// all the ordinary way (to measure what this is worth).
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_options.h"

namespace minfer::cuda {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// pdl_enabled() (cuda_options.h): whether launch_pdl asks for PDL.

template <class... Params, class... Args>
void launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = pdl_enabled() ? 1 : 0;
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    config.attrs = &attr;
    config.numAttrs = 1;
    CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

}  // namespace minfer::cuda
