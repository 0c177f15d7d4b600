// The CUDA backend's switches, read once from the environment when a backend is
// created (CudaOptions::from_env) and handed to the code they steer: the backend
// keeps fused_convert and sync_each_op, the launchers take decode_mma and
// quant_mma as arguments, CublasLtGemm takes fp8_fast_accum, and pdl goes to
// launch_pdl (pdl.cuh) through set_pdl_enabled. README.md's GPU section lists them.
#pragma once

namespace minfer::cuda {

struct CudaOptions {
    bool pdl = true;              // MINFER_PDL=0: every kernel launched without programmatic dependent launch
    bool fused_convert = true;    // MINFER_FUSED_CONVERT=0: norms/SwiGLU write no bf16 copy; GEMMs convert
    bool decode_mma = true;       // MINFER_DECODE_MMA=0: decode over a bf16 pool by the scalar kernel
    bool quant_mma = true;        // MINFER_QUANT_MMA=0: no quantized GEMM; widen to bf16 + cuBLASLt
    bool fp8_fast_accum = false;  // MINFER_FP8_FAST_ACCUM=1: cuBLASLt's FP8 fast accumulation
    bool sync_each_op = false;    // MINFER_CUDA_SYNC=1: wait after every op (a fault names its op)

    // On switches are on unless set to "0"; off switches are off unless set to something other than "" or "0".
    static CudaOptions from_env();
};

// The process's PDL switch, which launch_pdl (pdl.cuh) reads: on until a backend
// sets it from its CudaOptions::pdl.
bool pdl_enabled();
void set_pdl_enabled(bool on);

}  // namespace minfer::cuda
