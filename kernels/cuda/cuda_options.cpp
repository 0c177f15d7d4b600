// CudaOptions::from_env: the one place the CUDA backend reads the environment;
// and the process's PDL switch, which launch_pdl (pdl.cuh) reads.
#include "kernels/cuda/cuda_options.h"

#include <cstdlib>
#include <cstring>

namespace minfer::cuda {

namespace {

bool g_pdl_enabled = true;

// On unless set to "0".
bool switch_on(const char* name) {
    const char* v = std::getenv(name);
    return !(v && std::strcmp(v, "0") == 0);
}
// Off unless set to something other than "" or "0".
bool switch_set(const char* name) {
    const char* v = std::getenv(name);
    return v && *v && std::strcmp(v, "0") != 0;
}

}  // namespace

bool pdl_enabled() { return g_pdl_enabled; }
void set_pdl_enabled(bool on) { g_pdl_enabled = on; }

CudaOptions CudaOptions::from_env() {
    CudaOptions o;
    o.pdl = switch_on("MINFER_PDL");
    o.fused_convert = switch_on("MINFER_FUSED_CONVERT");
    o.decode_mma = switch_on("MINFER_DECODE_MMA");
    o.quant_mma = switch_on("MINFER_QUANT_MMA");
    o.fp8_fast_accum = switch_set("MINFER_FP8_FAST_ACCUM");
    o.sync_each_op = switch_set("MINFER_CUDA_SYNC");
    return o;
}

}  // namespace minfer::cuda
