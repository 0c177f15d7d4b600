// A 16-byte streaming load for weights a kernel reads once: `.nc` (read-only
// path) and L1::no_allocate, so they do not evict what the kernel reuses from
// L1 (its activations).
#pragma once

#include <cstdint>

namespace minfer::cuda {

__device__ __forceinline__ uint4 load_stream(const uint4* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

}  // namespace minfer::cuda
