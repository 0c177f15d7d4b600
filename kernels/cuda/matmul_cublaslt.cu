// Matmul through cuBLASLt.
//
// Row-major out[rows, n] = x[rows, k] * W^T is, read column-major, D[n, rows] =
// op(A) * B with A = W stored k x n (ld = ldw) and transposed, B = x stored
// k x rows: so m = n outputs, n = rows, k = inputs, and nothing is copied.
// F32 weights use CUBLAS_COMPUTE_32F, which is plain fp32 (TF32 would need
// CUBLAS_COMPUTE_32F_FAST_TF32). F16/BF16 weights take the activations
// converted into a workspace of the same type and padded like the weights, so
// that both operands have 16-byte aligned rows; the output stays fp32.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/pdl.cuh"

#define CUBLAS_CHECK(call) MINFER_CHECK_STATUS(call, CUBLAS_STATUS_SUCCESS, cublasLtGetStatusString)

namespace minfer::cuda {

namespace {

constexpr size_t kWorkspaceBytes = size_t(32) << 20;  // cuBLAS's advice for Hopper
constexpr int kThreads = 256;

unsigned grid_for(int64_t n) { return unsigned(std::min<int64_t>((n + kThreads - 1) / kThreads, 65536)); }

template <class T>
__device__ T from_float(float x);
template <>
__device__ __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __half from_float(float x) { return __float2half_rn(x); }

// xh[r, c] = x[r, c] for c < k, 0 for the padding columns k <= c < ld.
template <class T>
__global__ void convert_rows_kernel(const float* x, int64_t k, int64_t ld, int64_t total, T* xh) {
    pdl_wait();
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t r = i / ld, c = i % ld;
        xh[i] = from_float<T>(c < k ? x[r * k + c] : 0.0f);
    }
}

__device__ __forceinline__ uint2 pack4(float4 v, __nv_bfloat16*) { return pack_bf16x4(v.x, v.y, v.z, v.w); }
__device__ __forceinline__ uint2 pack4(float4 v, __half*) {
    const __half2 lo = __floats2half2_rn(v.x, v.y), hi = __floats2half2_rn(v.z, v.w);
    return make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
}

// The same, four columns a thread: 16-byte loads, 8-byte stores, and the row
// from the grid's y instead of a 64-bit division per element (the scalar
// kernel moved a 512-row prefill's activations at a third of the bandwidth).
// k and ld are multiples of 4, so four columns are all data or all padding.
template <class T>
__global__ void convert_rows4_kernel(const float* x, int32_t rows, int64_t k, int64_t ld, T* xh) {
    pdl_wait();
    const int64_t c = 4 * (blockIdx.x * int64_t(blockDim.x) + threadIdx.x);
    if (c >= ld) return;
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const float4 v = c < k ? *reinterpret_cast<const float4*>(x + r * k + c) : make_float4(0.f, 0.f, 0.f, 0.f);
        *reinterpret_cast<uint2*>(xh + r * ld + c) = pack4(v, xh);
    }
}

// x as bf16 or f16 rows of ld elements (zero padding past k).
template <class T>
void launch_convert_rows(const float* x, int32_t rows, int64_t k, int64_t ld, T* out, cudaStream_t stream) {
    const int64_t total = int64_t(rows) * ld;
    if (total == 0) return;
    const bool vec = k % 4 == 0 && ld % 4 == 0 && is_aligned(x, 16) && is_aligned(out, 8);
    if (!vec) {
        launch_pdl(convert_rows_kernel<T>, grid_for(total), kThreads, 0, stream, x, k, ld, total, out);
        return;
    }
    const dim3 grid(unsigned((ld / 4 + kThreads - 1) / kThreads), unsigned(std::min(rows, 65535)));
    launch_pdl(convert_rows4_kernel<T>, grid, kThreads, 0, stream, x, rows, k, ld, out);
}

__global__ void add_bias_kernel(float* out, const float* bias, int64_t n, int64_t total) {
    pdl_wait();
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
        out[i] += bias[i % n];
}

// The largest power of two (at most 256) that divides the address and the
// stride between rows: the alignment every row of the operand keeps.
uint32_t alignment(const void* p, int64_t ld_bytes) {
    const uint64_t bits = reinterpret_cast<uint64_t>(p) | uint64_t(ld_bytes) | 256;
    return uint32_t(bits & (~bits + 1));
}

// One cached cuBLASLt setup: descriptors and the heuristic's algorithm.
struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
};

// Plan types past DType's: E4M3 x E4M3 into fp32, unscaled or with A/B scale pointers.
constexpr int kPlanFp8 = 100, kPlanFp8Scaled = 101;

// (type, m, n, k, lda, ldb, alignment of A, B, D)
using PlanKey = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t, uint32_t, uint32_t, uint32_t>;

}  // namespace

void launch_rows_to_bf16(const float* x, int32_t rows, int64_t k, int64_t ld, void* out, cudaStream_t stream) {
    launch_convert_rows(x, rows, k, ld, static_cast<__nv_bfloat16*>(out), stream);
}

struct CublasLtGemm::Impl {
    cudaStream_t stream = nullptr;
    cublasLtHandle_t handle = nullptr;
    void* workspace = nullptr;
    DeviceBuffer xh;     // converted activations (F16/BF16 weights)
    uint64_t moves = 0;  // times xh (or fp8_wide, fp8_x) was reallocated
    std::map<PlanKey, Plan> plans;
    float* fp8_scalars = nullptr;      // FP8: amax and scale of the activations (device)
    std::map<PlanKey, int> fp8_mode;  // per shape: the fp8 path that works (run_fp8)
    // 0: scale pointers, 1: unscaled then rescaled, 2: widened weights (0 until tried).
    int& fp8_mode_of(int64_t n, int32_t rows, int64_t k) { return fp8_mode[PlanKey{kPlanFp8, n, rows, k, k, k, 0, 0, 0}]; }
    bool fp8_fast_accum = false;       // CudaOptions::fp8_fast_accum
    DeviceBuffer fp8_wide;             // fp8 weights widened to bf16 (the last resort)
    DeviceBuffer fp8_x;                // the activations in E4M3 (apart from xh, which the last resort uses)

    // Grows buf to at least `bytes` (only ever on growth: a step that fits
    // allocates nothing, so a warmed-up shape can be captured in a graph).
    void grow(DeviceBuffer& buf, size_t bytes) {
        if (buf.ensure(bytes, stream)) ++moves;
    }

    // fp8: the A/B scale pointers (device) the heuristic sees; later calls set their own.
    const Plan& plan_for(const PlanKey& key, cudaDataType_t ab_type,
                         const float* a_scale = nullptr, const float* b_scale = nullptr) {
        auto it = plans.find(key);
        if (it != plans.end()) return it->second;
        const auto [type, m, n, k, lda, ldb, align_a, align_b, align_d] = key;
        Plan p;
        CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
        if (a_scale) {
            CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale,
                                                        sizeof(a_scale)));
            CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale,
                                                        sizeof(b_scale)));
        }
        if (ab_type == CUDA_R_8F_E4M3) {
            // Fast accumulation (no periodic promotion of the tensor cores' partial
            // sums to fp32) is faster and less accurate: off unless asked for.
            const int8_t fast_accum = fp8_fast_accum ? 1 : 0;
            CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accum,
                                                        sizeof(fast_accum)));
        }
        CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, ab_type, k, m, lda));
        CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, ab_type, k, n, ldb));
        CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.d, CUDA_R_32F, m, n, m));

        cublasLtMatmulPreference_t pref = nullptr;
        CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
        const uint64_t ws = kWorkspaceBytes;
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a,
                                                          sizeof(align_a)));
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b,
                                                          sizeof(align_b)));
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d,
                                                          sizeof(align_d)));
        CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d,
                                                          sizeof(align_d)));
        cublasLtMatmulHeuristicResult_t result{};
        int found = 0;
        const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle, p.desc, p.a, p.b, p.d, p.d, pref, 1, &result, &found);
        cublasLtMatmulPreferenceDestroy(pref);
        if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
            destroy(p);
            throw std::runtime_error("cuBLASLt has no algorithm for a matmul of type " + std::to_string(type) + ", m=" +
                                     std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) + ": " +
                                     cublasLtGetStatusString(st));
        }
        p.algo = result.algo;
        return plans.emplace(key, p).first->second;
    }

    static void destroy(Plan& p) {
        if (p.a) cublasLtMatrixLayoutDestroy(p.a);
        if (p.b) cublasLtMatrixLayoutDestroy(p.b);
        if (p.d) cublasLtMatrixLayoutDestroy(p.d);
        if (p.desc) cublasLtMatmulDescDestroy(p.desc);
    }

    ~Impl() {
        for (auto& [key, p] : plans) destroy(p);
        cudaFree(fp8_scalars);
        cudaFree(workspace);
        if (handle) cublasLtDestroy(handle);
    }
};

CublasLtGemm::CublasLtGemm(cudaStream_t stream, bool fp8_fast_accum) : impl_(std::make_unique<Impl>()) {
    impl_->stream = stream;
    impl_->fp8_fast_accum = fp8_fast_accum;
    CUBLAS_CHECK(cublasLtCreate(&impl_->handle));
    CUDA_CHECK(cudaMalloc(&impl_->workspace, kWorkspaceBytes));
}

CublasLtGemm::~CublasLtGemm() = default;

uint64_t CublasLtGemm::buffer_moves() const { return impl_->moves; }

void CublasLtGemm::run(const float* x, int32_t rows, int64_t k, const void* w, DType type, int64_t n, int64_t ldw,
                       float* out, const void* x_bf16) {
    const GemvTarget target{w, int32_t(n), out};
    run_many(x, rows, k, &target, 1, type, ldw, x_bf16);
}

void* CublasLtGemm::bf16_input(int32_t rows, int64_t k) {
    impl_->grow(impl_->xh, size_t(rows) * size_t(k) * 2);
    return impl_->xh.get();
}

void CublasLtGemm::run_many(const float* x, int32_t rows, int64_t k, const GemvTarget* targets, int32_t count,
                            DType type, int64_t ldw, const void* x_bf16) {
    if (rows == 0 || count == 0) return;
    Impl& s = *impl_;
    const void* b = x;
    int64_t ldb = k, inner = k;
    cudaDataType_t ab_type = CUDA_R_32F;
    if (x_bf16) {  // converted already by the op that produced x
        if (type != DType::BF16 || ldw != k) throw std::logic_error("gemm: a bf16 input needs bf16 weights of k columns");
        ab_type = CUDA_R_16BF;
        b = x_bf16;
    } else if (type != DType::F32) {  // one conversion for every target
        ab_type = type == DType::BF16 ? CUDA_R_16BF : CUDA_R_16F;
        s.grow(s.xh, size_t(rows) * ldw * 2);  // grows to the largest step seen, then stays
        if (type == DType::BF16)
            launch_rows_to_bf16(x, rows, k, ldw, s.xh.get(), s.stream);
        else
            launch_convert_rows(x, rows, k, ldw, s.xh.as<__half>(), s.stream);
        b = s.xh.get();
        ldb = inner = ldw;  // the padding columns are zeros in both operands
    }
    const size_t elem = type == DType::F32 ? 4 : 2;
    for (int32_t i = 0; i < count; ++i) {
        const int64_t n = targets[i].n;
        if (n == 0) continue;
        const PlanKey key{int(type), n, rows, inner, ldw, ldb, alignment(targets[i].w, ldw * elem),
                          alignment(b, ldb * elem), alignment(targets[i].out, n * 4)};
        const Plan& p = s.plan_for(key, ab_type);
        const float alpha = 1.0f, beta = 0.0f;  // beta = 0: out is written, never read
        CUBLAS_CHECK(cublasLtMatmul(s.handle, p.desc, &alpha, targets[i].w, p.a, b, p.b, &beta, targets[i].out, p.d,
                                    targets[i].out, p.d, &p.algo, s.workspace, kWorkspaceBytes, s.stream));
    }
}

namespace {
// w8 [n x k] e4m3 times its scale, as bf16: the last-resort fp8 path.
__global__ void fp8_to_bf16_kernel(const __nv_fp8_e4m3* w8, const float* scale, int64_t total, __nv_bfloat16* out) {
    const float s = *scale;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
        out[i] = __float2bfloat16(float(w8[i]) * s);
}

__global__ void scale_by_kernel(float* out, const float* a, const float* b, int64_t total) {
    const float s = *a * *b;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
        out[i] *= s;
}
}  // namespace

// Tries, per shape and once: the FP8 GEMM with cuBLASLt's A/B scale
// pointers, then the unscaled FP8 GEMM followed by one multiply by both scales
// (cuBLASLt 13.1 on the H200 offers algorithms for scaled FP8 and then refuses
// to run every one of them: scripts/probes/fp8_cublaslt.cu), and when neither
// runs, the weights widened to bf16 into the plain bf16 GEMM. The path that
// worked is remembered.
void CublasLtGemm::run_fp8(const float* x, int32_t rows, int64_t k, const uint8_t* w8, const float* w_scale,
                           int64_t n, float* out) {
    const GemvTarget target{w8, int32_t(n), out};
    run_fp8_many(x, rows, k, &target, &w_scale, 1);
}

void CublasLtGemm::run_fp8_many(const float* x, int32_t rows, int64_t k, const GemvTarget* targets,
                                const float* const* w_scales, int32_t count) {
    if (rows == 0 || count == 0) return;
    if (k % 16) throw std::invalid_argument("fp8 gemm: k must be a multiple of 16");
    Impl& s = *impl_;
    // amax and the activations' scale, each 16-byte aligned as scale pointers must be.
    if (!s.fp8_scalars) CUDA_CHECK(cudaMalloc(&s.fp8_scalars, 8 * sizeof(float)));
    float* amax = s.fp8_scalars;
    float* x_scale = s.fp8_scalars + 4;
    // Once for every target, unless each one's shape is known to need the widened weights.
    bool quantize = false;
    for (int32_t i = 0; i < count; ++i) quantize = quantize || s.fp8_mode_of(targets[i].n, rows, k) != 2;
    uint8_t* xq = nullptr;
    if (quantize) {
        s.grow(s.fp8_x, size_t(rows) * size_t(k));
        xq = s.fp8_x.as<uint8_t>();
        launch_fp8_quantize_act(x, rows, k, xq, x_scale, amax, s.stream);
    }
    for (int32_t i = 0; i < count; ++i)
        fp8_gemm(x, xq, x_scale, rows, k, static_cast<const uint8_t*>(targets[i].w), w_scales[i], targets[i].n,
                 targets[i].out);
}

// One FP8 GEMM on activations already quantized (xq, *x_scale), in the first
// mode that works for the shape; x itself only for the last resort.
void CublasLtGemm::fp8_gemm(const float* x, const uint8_t* xq, const float* x_scale, int32_t rows, int64_t k,
                            const uint8_t* w8, const float* w_scale, int64_t n, float* out) {
    if (n == 0) return;
    Impl& s = *impl_;
    int& mode = s.fp8_mode_of(n, rows, k);
    if (mode == 2) {
        s.grow(s.fp8_wide, size_t(n) * size_t(k) * 2);
        const int64_t total = n * k;
        fp8_to_bf16_kernel<<<grid_for(total), kThreads, 0, s.stream>>>(
            reinterpret_cast<const __nv_fp8_e4m3*>(w8), w_scale, total, s.fp8_wide.as<__nv_bfloat16>());
        CUDA_CHECK_LAUNCH();
        run(x, rows, k, s.fp8_wide.get(), DType::BF16, n, k, out);
        return;
    }
    // D = (w_scale * W8) * (x_scale * X8): A = W8 (k x n, transposed), B = X8
    // (k x rows, not transposed): the TN layout that FP8 needs. False if
    // cuBLASLt has or runs no kernel for it.
    auto gemm = [&](int plan_type, const float* a_scale, const float* b_scale) {
        try {
            const PlanKey key{plan_type, n, rows, k, k, k, alignment(w8, k), alignment(xq, k), alignment(out, n * 4)};
            const Plan& p = s.plan_for(key, CUDA_R_8F_E4M3, a_scale, b_scale);
            if (a_scale) {
                CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale,
                                                            sizeof(a_scale)));
                CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale,
                                                            sizeof(b_scale)));
            }
            const float alpha = 1.0f, beta = 0.0f;
            return cublasLtMatmul(s.handle, p.desc, &alpha, w8, p.a, xq, p.b, &beta, out, p.d, out, p.d, &p.algo,
                                  s.workspace, kWorkspaceBytes, s.stream) == CUBLAS_STATUS_SUCCESS;
        } catch (const std::runtime_error&) {
            return false;
        }
    };
    if (mode == 0) {
        if (gemm(kPlanFp8Scaled, w_scale, x_scale)) return;
        mode = 1;
    }
    if (mode == 1) {
        if (gemm(kPlanFp8, nullptr, nullptr)) {
            const int64_t total = int64_t(rows) * n;
            scale_by_kernel<<<grid_for(total), kThreads, 0, s.stream>>>(out, w_scale, x_scale, total);
            CUDA_CHECK_LAUNCH();
            return;
        }
        mode = 2;
    }
    std::fprintf(stderr, "minfer: cuBLASLt runs no FP8 GEMM for n=%lld k=%lld rows=%d here; widening to bf16\n",
                 (long long)n, (long long)k, rows);
    fp8_gemm(x, xq, x_scale, rows, k, w8, w_scale, n, out);
}

void launch_add_bias(float* out, const float* bias, int32_t rows, int64_t n, cudaStream_t stream) {
    const int64_t total = int64_t(rows) * n;
    if (total == 0) return;
    launch_pdl(add_bias_kernel, grid_for(total), kThreads, 0, stream, out, bias, n, total);
}

}  // namespace minfer::cuda
