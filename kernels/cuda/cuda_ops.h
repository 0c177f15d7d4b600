// What the CUDA backend's class (cuda_backend.cpp) calls: one launcher per
// kernel, defined in the .cu file of its op family. Plain types only, so that
// the .cu files do not depend on engine headers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

namespace minfer::cuda {

// Whether p is a multiple of `bytes`: the launchers take the vector loads and
// stores (16-byte float4, 8-byte bf16 x 4) only where every row keeps it.
inline bool is_aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

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
    // Paged attention's query tiles (attention_prefill.cu's tensor-core kernels): up to
    // kAttnTileRows consecutive rows of one sequence each, as (sequence, first
    // row, row count) triples; built by CudaBackend::set_step from query_start.
    const int32_t* attn_tiles = nullptr;
    int32_t num_attn_tiles = 0;
};
constexpr int kAttnTileRows = 64;

enum class DType : int32_t { F32, F16, BF16 };
// The KV pool's elements (kernels/backend.h's KVDType).
enum class PoolType : int32_t { F32, BF16 };

// ---- elementwise.cu ------------------------------------------------------------
// out[i, :cols] = table[token_ids[i], :cols], widened to float; table rows are ld elements apart.
// The vocabulary rows a table holds (a vocabulary-parallel shard: ids outside give zeros).
struct TableRows {
    int64_t first = 0, count = 0;
};
void launch_embedding(const DeviceStep& st, const void* table, DType type, int64_t ld, int32_t cols, TableRows rows,
                      float* out, cudaStream_t stream);
// out = silu(gate) * up (gelu for geglu), elementwise; where out_bf16 is not null,
// the same values also rounded to bf16 there (the next GEMM's input), and where
// out_int8 is not null quantized there as launch_quantize_int8 would (the next
// int8 GEMV's input; n a multiple of 128 and out 16-byte aligned, else it is
// left alone). True when out_int8 was written.
bool launch_swiglu(const float* gate, const float* up, int64_t n, float* out, void* out_bf16, void* out_int8,
                   cudaStream_t stream);
bool launch_geglu(const float* gate, const float* up, int64_t n, float* out, void* out_bf16, void* out_int8,
                  cudaStream_t stream);
void launch_scale(float* x, int64_t n, float s, cudaStream_t stream);
// out[i] = x[logits_rows[i]], rows of dim floats.
void launch_gather_rows(const DeviceStep& st, const float* x, int32_t dim, float* out, cudaStream_t stream);

// ---- norm_rope.cu ----------------------------------------------------------------
// residual += delta (when not null); out = rmsnorm(residual) * weight, and where
// out_bf16 is not null the same rounded to bf16 there (rows of dim); where out_int8
// is not null, quantized there as launch_quantize_int8 would (dim a multiple of
// 128 and the rows 16-byte aligned, else it is left alone). True when out_int8
// was written.
bool launch_add_rms_norm(float* residual, const float* delta, const float* weight, float eps, int32_t rows,
                         int32_t dim, float* out, void* out_bf16, void* out_int8, cudaStream_t stream);

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
// k and v go into the pools as `pool` elements (bf16: rounded to nearest even, after RoPE).
void launch_rope_kv_write(const DeviceStep& st, float* q, const float* k, const float* v, HeadShape heads,
                          const RopeArgs& rope, void* k_pool, void* v_pool, PoolType pool, cudaStream_t stream);

// ---- attention.cu (attention_decode.cu, attention_prefill.cu) ----------------------------
constexpr int kMaxHeadDim = 256;
// Scratch the decode kernel's split partials need for this step and head shape
// (0 when none). It depends only on num_tokens, num_seqs, max_blocks_per_seq,
// block_size and the heads, as does the decode launch (CUDA-graph safe).
size_t paged_attention_workspace_bytes(const DeviceStep& st, HeadShape heads);
// workspace: device memory of at least paged_attention_workspace_bytes(st, heads)
// bytes (workspace_bytes says how much there is; too little falls back to slower kernels).
// decode_mma: CudaOptions::decode_mma (false: decode over a bf16 pool by the scalar kernel).
// out8: null, or int8_act_bytes(num_tokens, n_heads * head_dim) bytes for an int8
// copy of out (the int8 GEMVs' input, gemv_int8.cu). Returns whether it was
// written: by the split decode's combine, for head sizes of multiples of 128; it
// depends only on what the workspace does (CUDA-graph safe).
bool launch_paged_attention(const DeviceStep& st, const float* q, const void* k_pool, const void* v_pool,
                            PoolType pool, HeadShape heads, float scale, int32_t window, float* out, void* out8,
                            void* workspace, size_t workspace_bytes, bool decode_mma, cudaStream_t stream);

// ---- sampling.cu ---------------------------------------------------------------------
// out_ids[r] = the first index of the largest value of row r (std::max_element's tie rule;
// 0 for a row of NaNs). workspace: argmax_workspace_bytes(rows, vocab) of device memory.
size_t argmax_workspace_bytes(int32_t rows, int32_t vocab);
void launch_argmax_rows(const float* logits, int32_t rows, int32_t vocab, void* workspace, int32_t* out_ids,
                        cudaStream_t stream);

// ---- sampling_device.cu ----------------------------------------------------------------
// The whole of kernels/sampling.cpp's sample_row on the device. The host packs
// each step's rows (device_sampler.cpp) into one upload; every struct here is
// made of 4-byte fields only, so the sections of that upload are arrays of words.
struct SampleRowParams {
    float temperature = 1.0f;  // <= 0: greedy (the row takes the argmax; not in sampled_rows)
    int32_t top_k = 0;
    float top_p = 1.0f;
    float min_p = 0.0f;
    float repetition_penalty = 1.0f;
    uint32_t seed_lo = 0, seed_hi = 0;
    uint32_t stream_lo = 0, stream_hi = 0;
    uint32_t pos_lo = 0, pos_hi = 0;
    int32_t entry_begin = 0, entry_end = 0;  // this row's SampleTokenEntry range
    int32_t mask_begin = 0;                  // first word of its allowed mask in `masks`
    int32_t mask_words = -1;                 // -1: no mask; else words present (tokens past them are disallowed)
    // Speculative verification (SamplingRow::draft_token): >= 0, the drafted
    // token, verified by sample_sorted_kernel instead of the plain draw (greedy
    // rows ignore it: the argmax is the verification).
    int32_t draft_token = -1;
    // The draft's q: row draft_q_row of `draft_probs` (vocab floats each), or -1
    // for one-hot q at the draft (n-gram lookup).
    int32_t draft_q_row = -1;
};
// What a Philox draw is for: the purpose goes into the top byte of the stream,
// as kernels/sampling.h's draw_stream does (the values are its Draw's).
enum class SampleDraw : uint32_t { Sample = 0, Accept = 1, Recover = 2 };
// One distinct token id of a row whose logit is edited, with its edits in
// sample_row's order: biases (added one by one), suppression, repetition
// penalty, presence/frequency penalty.
constexpr int32_t kEntrySuppressed = 1;  // logit = -inf
constexpr int32_t kEntrySeen = 2;        // in prompt or output, and repetition_penalty != 1
constexpr int32_t kEntryPenalised = 4;   // logit -= penalty (presence + frequency * count, computed on the host)
struct SampleTokenEntry {
    int32_t id = 0;
    int32_t flags = 0;
    int32_t bias_begin = 0, bias_end = 0;  // range in `biases`
    float penalty = 0.0f;
};
struct DeviceSampling {
    const SampleRowParams* rows = nullptr;  // one per logits row
    const SampleTokenEntry* entries = nullptr;
    const float* biases = nullptr;
    const uint32_t* masks = nullptr;
    const int32_t* sampled_rows = nullptr;  // the non-greedy rows, ascending
    const int32_t* seg_offsets = nullptr;   // i * vocab for i in 0..max rows per sort chunk
    const float* draft_probs = nullptr;     // the drafts' q rows (SampleRowParams::draft_q_row), vocab floats each
    int32_t num_rows = 0;
    int32_t num_sampled = 0;
};
// Applies each row's mask and token entries to its logits in place (one block per row).
void launch_sample_processors(const DeviceSampling& s, float* logits, int32_t rows, int32_t vocab,
                              cudaStream_t stream);
// Scratch for sampling `chunk` rows of `vocab` at once: four arrays of
// chunk * vocab elements and CUB's temporary storage.
struct SampleScratch {
    float* keys[2] = {nullptr, nullptr};
    int32_t* vals[2] = {nullptr, nullptr};
    void* temp = nullptr;
    size_t temp_bytes = 0;
};
// Bytes of CUB temporary storage for sorting `chunk` rows of `vocab` (no launch).
size_t sample_sort_temp_bytes(int32_t chunk, int32_t vocab);
// Samples rows sampled_rows[first .. first + count) (count <= the scratch's chunk):
// sort by (logit desc, id asc), top-k, temperature, top-p, min-p, inverse CDF
// with philox_uniform(seed, stream, position), or for a row with a draft the
// reference's verify_draft (Accept and Recover draws); writes out_ids[row].
void launch_sample_sorted(const DeviceSampling& s, const float* logits, int32_t vocab, int32_t first,
                          int32_t count, const SampleScratch& scratch, int32_t* out_ids, cudaStream_t stream);

// ---- matmul_quant.cu ---------------------------------------------------------------------
// Quantized weights kept in their GGUF blocks (quant_blocks.cuh decodes them):
// n rows of k / block_elems blocks; k a multiple of the block size.
// Q8_0x8: Q8_0 regrouped at upload, 8 blocks' scales then their quants (quant_blocks.cuh).
enum class QType : int32_t { Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q8_0x8 };
int quant_block_elems(QType t);  // 32, or 256 for the K types and Q8_0x8
// Bytes of a block as the device holds it: the file's, except Q6_K's, padded
// from 210 to 224 (16-byte aligned blocks; the padding is never read as data),
// and Q8_0x8's 272 (8 file blocks).
int quant_block_bytes(QType t);
constexpr int kQuantGemvMaxRows = 8;
// out[rows, n] = x[rows, k] * W^T, rows in 1..kQuantGemvMaxRows. The weight's
// allocation must be padded to a multiple of 16 bytes (the kernel reads whole
// 16-byte words).
void launch_quant_gemv(QType t, const float* x, int32_t rows, int32_t k, const void* w, int32_t n, float* out,
                       cudaStream_t stream);
// out[rows, n] = x[rows, k] * W^T for 1..kQuantMmaMaxRows rows on the tensor cores,
// each block decoded once into shared memory (batched decode).
// The workspace holds x in bf16 (quant_gemm_workspace_bytes) and, where room
// is left, partial sums of splits along k for matrices of few output features.
constexpr int kQuantMmaMaxRows = 64;
size_t quant_gemm_workspace_bytes(int32_t rows, int32_t k);
void launch_quant_gemm(QType t, const float* x, int32_t rows, int32_t k, const void* w, int32_t n, float* out,
                       void* workspace, size_t workspace_bytes, cudaStream_t stream);
// How launch_quant_gemm splits k over CTAs for such a matmul with that workspace:
// `splits` CTAs along k of per_split stretches of 256 weights each, their partial
// sums then added by launch_sum_splits (kernels/cuda/dev/quant_gemm.cu launches its
// versions the same way).
struct QuantGemmSplit {
    int32_t splits, per_split;
};
QuantGemmSplit quant_gemm_split(int32_t rows, int32_t k, int32_t n, size_t workspace_bytes);
// out[i] = parts[0][i] + parts[1][i] + ... (count elements a part), in that order.
void launch_sum_splits(const float* parts, int32_t splits, int64_t count, float* out, cudaStream_t stream);
// Whether the backend takes launch_quant_gemm for a matmul of `rows` rows (more than
// the GEMV's, up to kQuantMmaMaxRows, the workspace large enough;
// enabled false, CudaOptions::quant_mma off, says never, to compare it with widening + cuBLASLt).
bool quant_gemm_usable(bool enabled, int32_t rows, int32_t k, size_t workspace_bytes);
// out[i, :k] = row token_ids[i] of W, decoded to float (a quantized embedding table).
void launch_quant_embedding(QType t, const DeviceStep& st, const void* w, int32_t k, TableRows rows, float* out,
                            cudaStream_t stream);
// W decoded to bf16 rows of ldw elements (ldw >= k; columns past k are left as they are), for the cuBLASLt GEMM.
void launch_quant_to_bf16(QType t, const void* w, int32_t n, int32_t k, int64_t ldw, void* out,
                          cudaStream_t stream);
// The same through the first version (one thread per unit, decoded straight to
// global memory), for minfer_gpu_ops --bench's comparison.
void launch_quant_to_bf16_v1(QType t, const void* w, int32_t n, int32_t k, int64_t ldw, void* out,
                             cudaStream_t stream);

// ---- matmul_fp8.cu (--quantization fp8) -----------------------------------------------------
// FP8 E4M3 weights with one float scale per tensor, kept in device memory:
// W ~= scale * W8, scale = absmax(W) / 448, W8 = e4m3(W / scale) (round to
// nearest even, saturating). k must be a multiple of 16 (rows of 16-byte words).
constexpr float kFp8Max = 448.0f;
// w8[n, k] = e4m3(w / *scale) of w[n, k] of `type` (device memory), with *scale =
// absmax / 448 (1 when w is all zeros) computed and written on the device.
// amax: one float of device scratch.
void launch_fp8_quantize_weight(const void* w, DType type, int64_t n, int64_t k, uint8_t* w8, float* scale,
                                float* amax, cudaStream_t stream);
// The activations' twin for the GEMM: xq[rows, k] = e4m3(x / *scale), *scale =
// absmax(x) / 448, all on the device (nothing is read back; graph-capturable).
void launch_fp8_quantize_act(const float* x, int64_t rows, int64_t k, uint8_t* xq, float* scale, float* amax,
                             cudaStream_t stream);

// ---- gemv.cu: decode matmuls of dense weights, fp32 activations and accumulation ----
constexpr int kGemvMaxRows = 8;
constexpr int kGemvMaxSegments = 3;
// One matrix of a launch: n rows of weights (16-byte padded), out[rows, n].
struct GemvTarget {
    const void* w = nullptr;
    int32_t n = 0;
    float* out = nullptr;
};
// Several F16/BF16 matrices of the same type and row length over one input, in one
// launch: targets[i].out = x * W_i^T, rows in 1..kGemvMaxRows, count <= kGemvMaxSegments.
void launch_dense_gemv_group(const float* x, int32_t rows, int32_t k, const GemvTarget* targets, int32_t count,
                             DType type, int64_t ldw, cudaStream_t stream);
// out[rows, n] = x[rows, k] * W^T, rows in 1..kGemvMaxRows; W: n rows of ldw
// F16/BF16 elements (ldw a multiple of 8 and >= k, the padding zeros).
void launch_dense_gemv(const float* x, int32_t rows, int32_t k, const void* w, DType type, int64_t ldw, int32_t n,
                       float* out, cudaStream_t stream);
// For benches only: a BF16 GEMV of `rows` rows with `features` features a warp
// and `unroll` words a feature in flight (one row: features 1, 2 or 4, unroll 2,
// 4 or 8 but not 4 x 8, and with the next stretch prefetched 1 x 2, 2 x 1, 2 x 2,
// 4 x 1; 2 to 5 rows: 2 x 2, 4 x 1, 4 x 2, 8 x 1); false for a combination it
// was not built for.
bool launch_bf16_gemv_variant(int rows, int features, int unroll, bool prefetch, const float* x, int32_t k,
                              const void* w, int64_t ldw, int32_t n, float* out, cudaStream_t stream);
// For benches only: the one-row FP8 GEMV with `features` features a warp,
// `unroll` words a feature in flight, the next stretch's loads issued before
// this one's are used when `prefetch` (1x8, 2x2, 2x4, 4x2, 4x4, 8x1, 8x2
// without; 1x4, 2x2, 2x4, 4x1, 4x2, 8x1 with); false for another combination.
bool launch_fp8_gemv_variant(int features, int unroll, bool prefetch, const float* x, int32_t k, const uint8_t* w8,
                             const float* scale, int32_t n, float* out, cudaStream_t stream);
// The FP8 GEMV of up to kGemvMaxSegments E4M3 matrices that share the input,
// in one launch: targets[i].out = *scales[i] * x * W8_i^T (each matrix k bytes a
// row, k a multiple of 16), rows in 1..kGemvMaxRows.
void launch_fp8_gemv_group(const float* x, int32_t rows, int32_t k, const GemvTarget* targets, const float* const* scales,
                           int32_t count, cudaStream_t stream);
// out[rows, n] = *scale * x[rows, k] * W8^T, rows in 1..kGemvMaxRows; W8 rows of k bytes, k a multiple of 16.
void launch_fp8_gemv(const float* x, int32_t rows, int32_t k, const uint8_t* w8, const float* scale, int32_t n,
                     float* out, cudaStream_t stream);

// ---- gemv_int8.cu: Q4_K, Q6_K and Q8_0 decode GEMVs on int8 activations (dp4a) -----------
// The activations of a matmul quantized to int8 with an fp32 scale and sum per
// 32 (k a multiple of 32), in int8_act_bytes(rows, k) bytes of device memory.
size_t int8_act_bytes(int32_t rows, int32_t k);
void launch_quantize_int8(const float* x, int32_t rows, int32_t k, void* act, cudaStream_t stream);
// Whether launch_int8_gemv_group multiplies weights of type t (Q4_K, Q6_K, Q8_0x8).
bool int8_gemv_takes(QType t);
// Up to kGemvMaxSegments matrices of type t over one quantized input, in one
// launch: targets[i].out = x * W_i^T, rows in 1..kQuantGemvMaxRows, k a multiple
// of 256 (act: launch_quantize_int8's output for these rows and k).
void launch_int8_gemv_group(QType t, const void* act, int32_t rows, int32_t k, const GemvTarget* targets,
                            int32_t count, cudaStream_t stream);
// For benches only: the one-row GEMV with 1, 2 or 4 features a warp, with or
// without the next unit's loads issued early; false for another combination.
bool launch_int8_gemv_variant(QType t, int features, bool prefetch, const void* act, int32_t k, const void* w,
                              int32_t n, float* out, cudaStream_t stream);

// ---- moe.cu: the mixture-of-experts FFN -------------------------------------------------
// A projection's experts: n_experts matrices of rows x cols, expert e's at
// data + e * expert_bytes, in a format this backend keeps quantized or plain
// (rows of whole blocks: cols a multiple of 32, or 256 for the K types).
enum class ExpertFormat : int32_t { Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q8_0x8, F32, F16, BF16 };
int expert_block_elems(ExpertFormat format);
struct ExpertMatrices {
    const void* data = nullptr;  // padded to 16 bytes past the last expert (the GEMV reads whole words)
    ExpertFormat format = ExpertFormat::F32;
    int32_t rows = 0;
    int32_t cols = 0;
    size_t expert_bytes = 0;
};
constexpr int32_t kMoeMaxExperts = 1024;
constexpr int32_t kMoeGemvMaxRows = 8;   // up to this many rows (F32 experts: any): a GEMV per (row, expert) pair
constexpr int32_t kMoeChunkRows = 1024;  // more rows go through in chunks of this many (bounds the workspace)
// Per row of logits [rows, n_experts]: the k largest probabilities of softmax
// (ties: the lower id first) as ids [rows, k] and weights [rows, k], the weights
// divided by their sum when renormalize (kernels/cpu/moe.h's moe_route).
void launch_moe_route(const float* logits, int32_t rows, int32_t n_experts, int32_t k, bool renormalize,
                      int32_t* ids, float* weights, cudaStream_t stream);
// Device memory launch_moe_experts needs for this shape.
size_t moe_workspace_bytes(int32_t rows, int32_t k, int32_t n_experts, int32_t dim, int32_t ffn);
// out[r] = sum over j < k, in order, of weights[r, j] * down_e(silu(gate_e x_r) * up_e x_r), e = ids[r, j];
// gate and up: ffn x dim experts, down: dim x ffn, of global ids first_expert ..
// first_expert + n_experts - 1 (pairs of other experts add nothing; a row with none is 0).
void launch_moe_experts(const float* x, const int32_t* ids, const float* weights, int32_t rows, int32_t k,
                        int32_t first_expert, int32_t n_experts, const ExpertMatrices& gate, const ExpertMatrices& up,
                        const ExpertMatrices& down, float* out, void* workspace, size_t workspace_bytes,
                        cudaStream_t stream);
// out[r] += sigmoid(gate_logit[r]) * y[r], rows of dim (qwen2moe's shared expert).
void launch_add_sigmoid_gated(const float* gate_logit, const float* y, int32_t rows, int32_t dim, float* out,
                              cudaStream_t stream);

// ---- matmul_cublaslt.cu -----------------------------------------------------------------
// out[rows, n] = x[rows, k] * W^T, W stored as n rows of `ldw` elements (ldw >= k;
// for half types the padding columns hold zeros). F32 weights run in exact
// fp32; F16/BF16 weights take the activations converted to the same type and
// accumulate in fp32. Algorithms are chosen once per shape and cached.
class CublasLtGemm {
public:
    // fp8_fast_accum: CudaOptions::fp8_fast_accum (cuBLASLt's FP8 fast accumulation).
    explicit CublasLtGemm(cudaStream_t stream, bool fp8_fast_accum = false);
    ~CublasLtGemm();
    CublasLtGemm(const CublasLtGemm&) = delete;
    CublasLtGemm& operator=(const CublasLtGemm&) = delete;

    void run(const float* x, int32_t rows, int64_t k, const void* w, DType type, int64_t n, int64_t ldw, float* out,
             const void* x_bf16 = nullptr);
    // run() for several weights of one type and row length over the same x: the
    // activations are converted once, then one GEMM per target.
    // x_bf16, when not null, holds x already as bf16 rows of ldw (== k) elements
    // (bf16_input's buffer, filled by the op that produced x), and nothing is converted.
    void run_many(const float* x, int32_t rows, int64_t k, const GemvTarget* targets, int32_t count, DType type,
                  int64_t ldw, const void* x_bf16 = nullptr);
    // The converted-activation buffer, grown to hold rows x k bf16: an op that
    // produces a GEMM's input may write it there as bf16 too.
    void* bf16_input(int32_t rows, int64_t k);
    // The FP8 twin: x quantized to E4M3 with a per-tensor scale computed on the
    // device, then an E4M3 x E4M3 GEMM (fp32 accumulation and output) scaled by
    // *w_scale * x's scale through cuBLASLt's A/B scale pointers. w8: n rows of k
    // bytes, k a multiple of 16. No host sync once a shape has been seen.
    void run_fp8(const float* x, int32_t rows, int64_t k, const uint8_t* w8, const float* w_scale, int64_t n,
                 float* out);
    // run_fp8() for several FP8 matrices of row length k over the same x (q/k/v,
    // gate/up): x is quantized once, then one GEMM per target (each W8 its scale).
    void run_fp8_many(const float* x, int32_t rows, int64_t k, const GemvTarget* targets, const float* const* w_scales,
                      int32_t count);
    // How often the converted-activation buffer has moved (a recorded step must be recorded again).
    uint64_t buffer_moves() const;

private:
    void fp8_gemm(const float* x, const uint8_t* xq, const float* x_scale, int32_t rows, int64_t k, const uint8_t* w8,
                  const float* w_scale, int64_t n, float* out);
    struct Impl;
    std::unique_ptr<Impl> impl_;
};
void launch_add_bias(float* out, const float* bias, int32_t rows, int64_t n, cudaStream_t stream);
// out[r, c] = bf16(x[r, c]) for c < k, zeros for k <= c < ld (the GEMMs' activations).
void launch_rows_to_bf16(const float* x, int32_t rows, int64_t k, int64_t ld, void* out, cudaStream_t stream);

}  // namespace minfer::cuda
