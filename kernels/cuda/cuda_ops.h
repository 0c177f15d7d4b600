// What the CUDA backend's class (cuda_backend.cpp) calls: one launcher per
// kernel, defined in the .cu file of its op family. Plain types only, so that
// the .cu files do not depend on engine headers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

namespace minfer::cuda {

// The current step's arrays in device memory (StepPlan's, plus the sequence
// of each row), passed to kernels by value.
struct DeviceStep {
    const int32_t* token_ids = nullptr;
    const int32_t* positions = nullptr;
    const int32_t* slot_mapping = nullptr;
    const int32_t* row_seq = nullptr;       // sequence index of each row
    const int32_t* query_start = nullptr;
    const int32_t* context_lens = nullptr;
    const int32_t* block_tables = nullptr;  // num_seqs x max_blocks_per_seq
    const int32_t* logits_rows = nullptr;
    int32_t num_tokens = 0;
    int32_t num_seqs = 0;
    int32_t max_blocks_per_seq = 0;
    int32_t num_logit_rows = 0;
    int32_t block_size = 16;
};

enum class DType : int32_t { F32, F16, BF16 };

// ---- elementwise.cu ------------------------------------------------------------
// out[i, :cols] = table[token_ids[i], :cols], widened to float; table rows are ld elements apart.
void launch_embedding(const DeviceStep& st, const void* table, DType type, int64_t ld, int32_t cols, float* out,
                      cudaStream_t stream);
void launch_swiglu(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream);
void launch_geglu(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream);
void launch_scale(float* x, int64_t n, float s, cudaStream_t stream);
// out[i] = x[logits_rows[i]], rows of dim floats.
void launch_gather_rows(const DeviceStep& st, const float* x, int32_t dim, float* out, cudaStream_t stream);

// ---- norm_rope.cu ----------------------------------------------------------------
void launch_add_rms_norm(float* residual, const float* delta, const float* weight, float eps, int32_t rows,
                         int32_t dim, float* out, cudaStream_t stream);

constexpr int kMaxRotPairs = 128;  // n_rot <= 256
struct RopeArgs {
    int32_t n_rot = 0;
    bool neox = false;
    float position_scale = 1.0f;
    const float* freq_factors = nullptr;  // device memory, n_rot/2 divisors, or null
    float inv_freq[kMaxRotPairs];         // base^(-2i/n_rot), computed on the host like the CPU does
};
struct HeadShape {
    int32_t n_heads = 0;
    int32_t n_kv_heads = 0;
    int32_t head_dim = 0;
};
void launch_rope_kv_write(const DeviceStep& st, float* q, const float* k, const float* v, HeadShape heads,
                          const RopeArgs& rope, float* k_pool, float* v_pool, cudaStream_t stream);

// ---- attention.cu ------------------------------------------------------------------
constexpr int kMaxHeadDim = 256;
void launch_paged_attention(const DeviceStep& st, const float* q, const float* k_pool, const float* v_pool,
                            HeadShape heads, float scale, int32_t window, float* out, cudaStream_t stream);

// ---- sampling.cu ---------------------------------------------------------------------
// out_ids[r] = the first index of the largest value of row r (std::max_element's tie rule).
void launch_argmax_rows(const float* logits, int32_t rows, int32_t vocab, int32_t* out_ids, cudaStream_t stream);

// ---- matmul_quant.cu ---------------------------------------------------------------------
// Quantized weights kept in their GGUF blocks (quant_blocks.cuh decodes them):
// n rows of k / block_elems blocks; k a multiple of the block size.
enum class QType : int32_t { Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K };
int quant_block_elems(QType t);  // 32, or 256 for the K types
constexpr int kQuantGemvMaxRows = 8;
// out[rows, n] = x[rows, k] * W^T, rows in 1..kQuantGemvMaxRows. The weight's
// allocation must be padded to a multiple of 16 bytes (the kernel reads whole
// 16-byte words).
void launch_quant_gemv(QType t, const float* x, int32_t rows, int32_t k, const void* w, int32_t n, float* out,
                       cudaStream_t stream);
// out[i, :k] = row token_ids[i] of W, decoded to float (a quantized embedding table).
void launch_quant_embedding(QType t, const DeviceStep& st, const void* w, int32_t k, float* out,
                            cudaStream_t stream);
// W decoded to bf16 rows of ldw elements (ldw >= k; columns past k are left as they are), for the cuBLASLt GEMM.
void launch_quant_to_bf16(QType t, const void* w, int32_t n, int32_t k, int64_t ldw, void* out,
                          cudaStream_t stream);

// ---- matmul_cublaslt.cu -----------------------------------------------------------------
// out[rows, n] = x[rows, k] * W^T, W stored as n rows of `ldw` elements (ldw >= k;
// for half types the padding columns hold zeros). F32 weights run in exact
// fp32; F16/BF16 weights take the activations converted to the same type and
// accumulate in fp32. Algorithms are chosen once per shape and cached.
class CublasLtGemm {
public:
    explicit CublasLtGemm(cudaStream_t stream);
    ~CublasLtGemm();
    CublasLtGemm(const CublasLtGemm&) = delete;
    CublasLtGemm& operator=(const CublasLtGemm&) = delete;

    void run(const float* x, int32_t rows, int64_t k, const void* w, DType type, int64_t n, int64_t ldw, float* out);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};
void launch_add_bias(float* out, const float* bias, int32_t rows, int64_t n, cudaStream_t stream);

}  // namespace minfer::cuda
