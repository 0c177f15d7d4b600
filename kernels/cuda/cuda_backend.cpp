// The CUDA backend: device memory, the step's arrays on the device, and the
// ops, each a launch (or a cuBLASLt call) on the backend's one stream. The
// kernels live in the .cu files of their op family (cuda_ops.h lists them).
//
// Everything runs in order on one non-blocking stream; upload and download
// wait for it, so to the caller they are synchronous.
//
// Over 600 lines, as one class: weight upload, the step's arrays, the ops and
// the graph recordings all share the stream, the device buffers and the
// recordings' invalidation (workspace_moved), which a split would have to
// expose in a header of private state.
#include "kernels/cuda/cuda_backend.h"

#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_options.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/staging.h"
#include "kernels/cuda/device_sampler.h"

namespace minfer {

namespace {

using cuda::DType;

// A matrix uploaded once. Rows of F16/BF16 matrices are padded with zeros to a
// multiple of 8 elements (16 bytes), which cuBLASLt's fast kernels want.
// Quantized matrices keep their GGUF blocks; dtype and ld then describe their
// bf16 widening for the prefill GEMM.
struct CudaWeight final : PackedWeight {
    void* data = nullptr;
    DType dtype = DType::F32;
    int64_t ld = 0;                     // elements from one row to the next
    std::optional<cuda::QType> quant;  // data holds GGUF blocks of this type as they are
    // --quantization fp8: data holds rows x cols E4M3 bytes (ld = cols, a multiple
    // of 16) followed by the tensor's float scale, which this points at.
    float* fp8_scale = nullptr;
    ~CudaWeight() override { cudaFree(data); }
};

// Dense F16/BF16 matmuls of a few rows take gemv.cu's GEMV, which reads fp32
// activations (no conversion launch) and streams the weights at 64-88% of HBM
// bandwidth on Llama-3-8B's shapes at one row; more rows go to cuBLASLt. Where
// the line lies, `minfer_gpu_ops --bench-gemv` on an H100 (µs, GEMV against
// cuBLASLt): at 2 rows the GEMV wins on every shape (k/v 9.7 / 19.0, q/o 14.2 /
// 20.9, q/k/v 19.1 / 24.2, gate/up 41.7 / 44.2, down 43.1 / 45.6, LM head 336 /
// 367); at 3 to 5 rows only on the LM head (340-355 / 367-369): activations
// re-read per feature group cost the smaller matrices more than cuBLASLt's tiles.
// (At 8 rows it took 39 µs for q/o and 125 µs for down; a tensor-core GEMV for
// 2 to 8 rows lost on gate/up, down and the LM head: PERFLOG, 2026-12-06.)
constexpr int32_t kDenseGemvMaxRows = 2;
constexpr int32_t kWideGemvMinFeatures = 32768, kWideGemvMaxRows = 5;  // vocabulary-sized: the LM head
bool dense_gemv_takes(int32_t rows, int64_t features) {
    return rows <= kDenseGemvMaxRows || (features >= kWideGemvMinFeatures && rows <= kWideGemvMaxRows);
}

// The quantized types kept quantized on the device.
std::optional<cuda::QType> quant_type_of(GGMLType t) {
    switch (t) {
        case GGMLType::Q8_0: return cuda::QType::Q8_0;
        case GGMLType::Q4_0: return cuda::QType::Q4_0;
        case GGMLType::Q4_1: return cuda::QType::Q4_1;
        case GGMLType::Q5_0: return cuda::QType::Q5_0;
        case GGMLType::Q5_1: return cuda::QType::Q5_1;
        case GGMLType::Q4_K: return cuda::QType::Q4_K;
        case GGMLType::Q5_K: return cuda::QType::Q5_K;
        case GGMLType::Q6_K: return cuda::QType::Q6_K;
        default: return std::nullopt;
    }
}

// A projection's experts: the file's 3-D tensor uploaded as it is (moe.cu reads
// expert e's matrix at e * expert_bytes).
struct CudaExperts final : PackedExperts {
    void* data = nullptr;
    cuda::ExpertMatrices m;
    ~CudaExperts() override { cudaFree(data); }
};

std::optional<cuda::ExpertFormat> expert_format_of(GGMLType t) {
    if (const auto q = quant_type_of(t)) return cuda::ExpertFormat(int32_t(*q));  // the same order
    switch (t) {
        case GGMLType::F32: return cuda::ExpertFormat::F32;
        case GGMLType::F16: return cuda::ExpertFormat::F16;
        case GGMLType::BF16: return cuda::ExpertFormat::BF16;
        default: return std::nullopt;
    }
}
static_assert(int32_t(cuda::QType::Q8_0x8) == int32_t(cuda::ExpertFormat::Q8_0x8), "ExpertFormat starts with QType's order");

// Bytes of a row of `cols` weights in the device's block layout (cuda::quant_block_bytes).
size_t quant_row_bytes(cuda::QType q, int64_t cols) {
    return size_t(cols / cuda::quant_block_elems(q)) * size_t(cuda::quant_block_bytes(q));
}

// The element type of a plain matrix, or of the bf16 widening of a quantized one.
DType dtype_of(const WeightView& v) {
    if (quant_type_of(v.type)) return DType::BF16;
    switch (v.type) {
        case GGMLType::F32: return DType::F32;
        case GGMLType::F16: return DType::F16;
        case GGMLType::BF16: return DType::BF16;
        default: throw std::invalid_argument("cuda: weight '" + v.name + "' has type " + ggml_type_name(v.type) +
                                             ", which this backend cannot run yet");
    }
}

class CudaBackend final : public Backend {
public:
    explicit CudaBackend(int device, const BackendOptions& options = {})
        : options_(options), cuda_options_(cuda::CudaOptions::from_env()) {
        cuda::set_pdl_enabled(cuda_options_.pdl);
        CUDA_CHECK(cudaSetDevice(device));
        CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
        CUDA_CHECK(cudaEventCreateWithFlags(&step_copied_, cudaEventDisableTiming));
        for (cudaEvent_t* e : {&step_begin_, &step_end_[0], &step_end_[1]}) CUDA_CHECK(cudaEventCreate(e));
        gemm_ = std::make_unique<cuda::CublasLtGemm>(stream_, cuda_options_.fp8_fast_accum);
        sampler_ = std::make_unique<cuda::DeviceSampler>(stream_);
    }

    ~CudaBackend() override {
        drop_recordings();
        for (cudaEvent_t e : {step_begin_, step_end_[0], step_end_[1]}) cudaEventDestroy(e);
        gemm_.reset();
        sampler_.reset();
        cudaFree(scratch_);
        cudaFree(step_dev_);
        cudaFreeHost(step_host_);
        cudaEventDestroy(step_copied_);
        cudaStreamDestroy(stream_);
    }

    std::string name() const override { return "cuda"; }
    bool supports_kv_dtype(KVDType) const override { return true; }
    // bf16 halves the bytes decode attention reads, as vLLM's auto (the model's dtype) does for bf16 models.
    KVDType default_kv_dtype() const override { return KVDType::BF16; }

    // Memory changed from the host drops the bf16 copy (see Bf16Copy): its
    // activation's address may now hold something else.
    void* alloc(size_t bytes) override {
        forget_copies();
        void* p = nullptr;
        CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 1)));
        return p;
    }
    // free runs from destructors, so it does not throw: a failure here is a
    // sticky error that the next checked call reports.
    void free(void* p) override {
        if (!p) return;
        forget_copies();
        cudaStreamSynchronize(stream_);  // no op in flight may still use it
        drop_recordings();               // which may hold its address (a runner's buffers, its KV pool)
        cudaFree(p);
    }
    void upload(void* dst, const void* src, size_t bytes) override {
        forget_copies();
        CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_));
        synchronize();
        traffic_.host_to_device_bytes += int64_t(bytes);
    }
    void download(void* dst, const void* src, size_t bytes) override {
        CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_));
        synchronize();
        traffic_.device_to_host_bytes += int64_t(bytes);
    }
    void copy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width_bytes,
                 size_t rows) override {
        CUDA_CHECK(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width_bytes, rows, cudaMemcpyDeviceToDevice,
                                     stream_));
    }
    size_t available_memory() const override {
        size_t free = 0, total = 0;
        CUDA_CHECK(cudaMemGetInfo(&free, &total));
        return free;
    }
    size_t total_memory() const override {
        size_t free = 0, total = 0;
        CUDA_CHECK(cudaMemGetInfo(&free, &total));
        return total;
    }

    void copy_kv_blocks(KVCache& cache, std::span<const int32_t> pairs) override {
        for_each_kv_block_copy(cache, pairs, [&](void* dst, const void* src, size_t bytes) {
            CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
        });
    }
    void synchronize() override { CUDA_CHECK(cudaStreamSynchronize(stream_)); }

    // Every block's copy queued on the stream, one wait at the end (not one a block).
    void kv_blocks_to_host(const KVCache& cache, std::span<const int32_t> blocks, int32_t layer, void* k_out,
                           void* v_out) override {
        for_each_kv_block_io(cache, blocks, layer, "kv_blocks_to_host", [&](size_t i, char* k, char* v, size_t bytes) {
            CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(k_out) + i * bytes, k, bytes, cudaMemcpyDeviceToHost, stream_));
            CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(v_out) + i * bytes, v, bytes, cudaMemcpyDeviceToHost, stream_));
            traffic_.device_to_host_bytes += int64_t(2 * bytes);
        });
        synchronize();
    }
    void kv_blocks_from_host(KVCache& cache, std::span<const int32_t> blocks, int32_t layer, const void* k_in,
                             const void* v_in) override {
        forget_copies();  // as upload(): device memory changed under any cached conversion
        for_each_kv_block_io(cache, blocks, layer, "kv_blocks_from_host", [&](size_t i, char* k, char* v, size_t bytes) {
            CUDA_CHECK(cudaMemcpyAsync(k, static_cast<const char*>(k_in) + i * bytes, bytes, cudaMemcpyHostToDevice, stream_));
            CUDA_CHECK(cudaMemcpyAsync(v, static_cast<const char*>(v_in) + i * bytes, bytes, cudaMemcpyHostToDevice, stream_));
            traffic_.host_to_device_bytes += int64_t(2 * bytes);
        });
        synchronize();
    }

    // A shard is uploaded as a matrix of its own, straight from the parent's
    // rows: every upload is a pitched copy, which reads a column shard's pieces
    // of the rows at the parent's row stride (a whole matrix: its own).
    std::unique_ptr<PackedWeight> pack_weight(const WeightView& v, const ShardSpec& shard = {}) override {
        const ShardRange r = shard_range(v.type, v.rows, v.cols, shard, v.name.c_str());
        return upload_weight(WeightView{v.name, v.type, r.rows, r.cols, v.data + r.offset}, r.row_stride);
    }

    // ---- mixture of experts (moe.cu) ----
    bool supports_moe() const override { return true; }

    std::unique_ptr<PackedExperts> pack_experts(const WeightView& all, int32_t n_experts) override {
        const auto format = expert_format_of(all.type);
        if (!format)
            throw std::invalid_argument("cuda: expert tensor '" + all.name + "' has type " +
                                        ggml_type_name(all.type) + ", which this backend cannot run yet");
        if (n_experts > cuda::kMoeMaxExperts)
            throw std::invalid_argument("cuda: expert tensor '" + all.name + "' has " + std::to_string(n_experts) +
                                        " experts; at most " + std::to_string(cuda::kMoeMaxExperts) + " run here");
        if (all.cols % cuda::expert_block_elems(*format))
            throw std::invalid_argument("cuda: expert tensor '" + all.name + "' has rows of " +
                                        std::to_string(all.cols) + " weights, not whole blocks of " +
                                        std::to_string(cuda::expert_block_elems(*format)));
        auto x = std::make_unique<CudaExperts>();
        set_expert_shape(*x, all, n_experts, name());
        const auto quant = quant_type_of(all.type);
        const size_t row = quant ? quant_row_bytes(*quant, all.cols) : ggml_row_bytes(all.type, all.cols);
        if (quant) {
            x->data = upload_blocks(all.data, ggml_row_bytes(all.type, all.cols), all.type, *quant, all.rows, all.cols);
        } else {
            const size_t bytes = size_t(all.rows) * row, padded = (bytes + 15) / 16 * 16;
            x->data = alloc(padded);
            CUDA_CHECK(cudaMemsetAsync(static_cast<char*>(x->data) + bytes, 0, padded - bytes, stream_));
            upload(x->data, all.data, bytes);
        }
        x->m = {x->data, *format, int32_t(x->rows), int32_t(x->cols), size_t(all.rows) * row / size_t(n_experts)};
        return x;
    }

    void moe_route(const float* logits, int32_t rows, const MoeRouting& r, int32_t* ids, float* weights) override {
        cuda::launch_moe_route(logits, rows, r.n_experts, r.k, r.renormalize, ids, weights, stream_);
        after_op();
    }

    void moe_experts(const float* x, const int32_t* ids, const float* weights, int32_t rows, int32_t k,
                     const PackedExperts& gate, const PackedExperts& up, const PackedExperts& down,
                     float* out) override {
        const auto& g = static_cast<const CudaExperts&>(gate).m;
        const size_t ws = cuda::moe_workspace_bytes(rows, k, gate.n_experts, g.cols, g.rows);
        if (ws > moe_ws_.bytes()) workspace_moved();
        moe_ws_.ensure(ws, stream_);
        cuda::launch_moe_experts(x, ids, weights, rows, k, gate.first_expert, gate.n_experts, g, static_cast<const CudaExperts&>(up).m,
                                 static_cast<const CudaExperts&>(down).m, out, moe_ws_.get(), moe_ws_.bytes(),
                                 stream_);
        after_op();
    }

    void add_sigmoid_gated(const float* gate_logit, const float* y, int32_t rows, int32_t dim, float* out) override {
        cuda::launch_add_sigmoid_gated(gate_logit, y, rows, dim, out, stream_);
        after_op();
    }

    void set_step(const StepPlan& plan, int32_t block_size) override {
        forget_copies();
        const size_t n = plan.token_ids.size(), seqs = plan.context_lens.size();
        if (plan.query_start.size() != seqs + 1 || plan.positions.size() != n || plan.slot_mapping.size() != n)
            throw std::invalid_argument("cuda: the step plan's arrays disagree in length");
        const std::vector<int32_t>* arrays[] = {&plan.token_ids,    &plan.positions,    &plan.slot_mapping,
                                                &plan.query_start,  &plan.context_lens, &plan.block_tables,
                                                &plan.logits_rows};
        size_t total = n;  // row_seq comes first
        for (const auto* a : arrays) total += a->size();
        // Paged attention's query tiles: up to kAttnTileRows consecutive rows of one sequence.
        attn_tiles_.clear();
        for (size_t s = 0; s < seqs; ++s)
            for (int32_t r = std::max(plan.query_start[s], 0); r < plan.query_start[s + 1] && r < int32_t(n);
                 r += cuda::kAttnTileRows)
                attn_tiles_.insert(attn_tiles_.end(),
                                   {int32_t(s), r, std::min(cuda::kAttnTileRows, plan.query_start[s + 1] - r)});
        total += attn_tiles_.size();  // after the arrays

        // The previous step's copy must have left the staging buffer before it is rewritten.
        CUDA_CHECK(cudaEventSynchronize(step_copied_));
        end_step();  // a step that sampled nothing (a prefill chunk) ends where the next begins
        CUDA_CHECK(cudaEventRecord(step_begin_, stream_));
        step_open_ = true;
        if (total * sizeof(int32_t) > step_capacity_) {
            workspace_moved();  // recordings read the step's arrays where they were
            cuda::grow_staging(step_dev_, step_host_, step_capacity_, total * sizeof(int32_t), stream_);
        }

        int32_t* h = step_host_;
        std::fill(h, h + n, 0);
        for (size_t s = 0; s < seqs; ++s)
            for (int32_t r = std::max(plan.query_start[s], 0); r < plan.query_start[s + 1] && r < int32_t(n); ++r)
                h[r] = int32_t(s);
        const int32_t* d = step_dev_;
        const int32_t* starts[std::size(arrays)];
        size_t offset = n;
        for (size_t i = 0; i < std::size(arrays); ++i) {
            std::copy(arrays[i]->begin(), arrays[i]->end(), h + offset);
            starts[i] = d + offset;
            offset += arrays[i]->size();
        }
        std::copy(attn_tiles_.begin(), attn_tiles_.end(), h + offset);
        step_.attn_tiles = d + offset;
        step_.num_attn_tiles = int32_t(attn_tiles_.size() / 3);
        CUDA_CHECK(cudaMemcpyAsync(step_dev_, step_host_, total * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
        CUDA_CHECK(cudaEventRecord(step_copied_, stream_));
        traffic_.host_to_device_bytes += int64_t(total * sizeof(int32_t));

        step_.row_seq = d;
        step_.token_ids = starts[0];
        step_.positions = starts[1];
        step_.slot_mapping = starts[2];
        step_.query_start = starts[3];
        step_.context_lens = starts[4];
        step_.block_tables = starts[5];
        step_.logits_rows = starts[6];
        step_.num_tokens = int32_t(n);
        step_.num_seqs = int32_t(seqs);
        step_.max_blocks_per_seq = plan.max_blocks_per_seq;
        step_.num_logit_rows = int32_t(plan.logits_rows.size());
        step_.block_size = block_size;
        host_token_ids_ = h + n;
    }

    void embedding(const PackedWeight& table, int64_t first_row, float* out) override {
        const auto& w = static_cast<const CudaWeight&>(table);
        for (int32_t i = 0; i < step_.num_tokens; ++i)
            if (host_token_ids_[i] < 0) throw std::out_of_range("negative token id");
        const cuda::TableRows rows{first_row, w.rows};
        if (w.quant)
            cuda::launch_quant_embedding(*w.quant, step_, w.data, int32_t(w.cols), rows, out, stream_);
        else
            cuda::launch_embedding(step_, w.data, w.dtype, w.ld, int32_t(w.cols), rows, out, stream_);
        after_op();
    }

    void add_rms_norm(float* residual, const float* delta, const float* weight, float eps, int32_t rows,
                      int32_t dim, float* out) override {
        // In place (per-head q/k norms, Gemma's post-norms) feeds no GEMM: no bf16 copy.
        void* out16 = out != residual ? bf16_copy_target(rows, dim) : nullptr;
        void* out8 = out != residual ? int8_copy_target(rows, dim) : nullptr;
        const bool wrote8 = cuda::launch_add_rms_norm(residual, delta, weight, eps, rows, dim, out, out16, out8, stream_);
        made_bf16_copy(out, rows, dim, out16);
        if (wrote8) made_int8_copy(out, rows, dim);
        after_op();
    }

    void rope_kv_write(float* q, const float* k, const float* v, const AttentionParams& a, const RopeParams& rope,
                       KVCache& cache, int32_t layer) override {
        check_heads(a);
        if (rope.n_rot < 0 || rope.n_rot % 2 || rope.n_rot > a.head_dim || rope.n_rot / 2 > cuda::kMaxRotPairs)
            throw std::invalid_argument("cuda: rope n_rot must be even and at most the head size (256)");
        cuda::RopeArgs r;
        r.n_rot = rope.n_rot;
        r.neox = rope.neox;
        r.position_scale = rope.position_scale;
        r.freq_factors = rope.freq_factors;
        // The same expression as the CPU's, so the frequencies are bit-identical.
        for (int32_t i = 0; i < rope.n_rot / 2; ++i) r.inv_freq[i] = std::pow(rope.base, -2.0f * i / rope.n_rot);
        cuda::launch_rope_kv_write(step_, q, k, v, {a.n_heads, a.n_kv_heads, a.head_dim}, r, cache.k[layer],
                                   cache.v[layer], pool_type(cache), stream_);
        after_op();
    }

    void paged_attention(const float* q, const AttentionParams& a, const KVCache& cache, int32_t layer,
                         float* out) override {
        check_heads(a);
        const cuda::HeadShape heads{a.n_heads, a.n_kv_heads, a.head_dim};
        // The decode kernel's split partials: the buffer only grows (after the stream has drained).
        const size_t ws = cuda::paged_attention_workspace_bytes(step_, heads);
        if (ws > attn_ws_.bytes()) workspace_moved();
        attn_ws_.ensure(ws, stream_);
        // o_proj's int8 copy, where the decode's combine can write it.
        const int64_t cols = int64_t(a.n_heads) * a.head_dim;
        void* out8 = int8_copy_target(step_.num_tokens, cols);
        if (cuda::launch_paged_attention(step_, q, cache.k[layer], cache.v[layer], pool_type(cache), heads, a.scale,
                                         a.window, out, out8, attn_ws_.get(), attn_ws_.bytes(),
                                         cuda_options_.decode_mma, stream_))
            made_int8_copy(out, step_.num_tokens, cols);
        after_op();
    }

    void matmul(const float* x, const PackedWeight& pw, const float* bias, int32_t rows, float* out) override {
        const auto& w = static_cast<const CudaWeight&>(pw);
        const uint64_t gemm_moves = gemm_->buffer_moves();
        if (w.fp8_scale && rows <= cuda::kGemvMaxRows) {
            cuda::launch_fp8_gemv(x, rows, int32_t(w.cols), static_cast<const uint8_t*>(w.data), w.fp8_scale,
                                  int32_t(w.rows), out, stream_);
        } else if (w.fp8_scale) {
            gemm_->run_fp8(x, rows, w.cols, static_cast<const uint8_t*>(w.data), w.fp8_scale, w.rows, out);
        } else if (w.quant && rows <= cuda::kQuantGemvMaxRows && cuda::int8_gemv_takes(*w.quant)) {
            const cuda::GemvTarget target{w.data, int32_t(w.rows), out};
            cuda::launch_int8_gemv_group(*w.quant, int8_copy_of(x, rows, w.cols), rows, int32_t(w.cols), &target, 1,
                                         stream_);
        } else if (w.quant && rows <= cuda::kQuantGemvMaxRows) {
            cuda::launch_quant_gemv(*w.quant, x, rows, int32_t(w.cols), w.data, int32_t(w.rows), out, stream_);
        } else if (w.quant && cuda::quant_gemm_usable(cuda_options_.quant_mma, rows, int32_t(w.cols), scratch_bytes_)) {
            cuda::launch_quant_gemm(*w.quant, x, rows, int32_t(w.cols), w.data, int32_t(w.rows), out, scratch_,
                                    scratch_bytes_, stream_);
        } else if (w.quant) {
            cuda::launch_quant_to_bf16(*w.quant, w.data, int32_t(w.rows), int32_t(w.cols), w.ld, scratch_, stream_);
            gemm_->run(x, rows, w.cols, scratch_, DType::BF16, w.rows, w.ld, out, bf16_copy_of(x, rows, w));
        } else if (w.dtype != DType::F32 && dense_gemv_takes(rows, w.rows)) {
            cuda::launch_dense_gemv(x, rows, int32_t(w.cols), w.data, w.dtype, w.ld, int32_t(w.rows), out, stream_);
        } else {
            gemm_->run(x, rows, w.cols, w.data, w.dtype, w.rows, w.ld, out, bf16_copy_of(x, rows, w));
        }
        if (gemm_->buffer_moves() != gemm_moves) workspace_moved();
        if (bias) cuda::launch_add_bias(out, bias, rows, w.rows, stream_);
        after_op();
    }

    // Dense F16/BF16 weights of one type and row length (q/k/v, gate/up): one GEMV
    // launch at the rows dense_gemv_takes, one activation conversion for the
    // cuBLASLt GEMMs above them. FP8 weights of one row length: one GEMV launch up
    // to kGemvMaxRows rows (each matrix with its scale), one activation
    // quantization for the GEMMs above. Anything else (quantized, F32, mixed)
    // goes one matmul at a time.
    void matmul_shared_input(const float* x, std::span<const MatmulTarget> targets, int32_t rows) override {
        if (targets.empty()) return;
        const auto& first = static_cast<const CudaWeight&>(*targets.front().w);
        if (fp8_group(x, targets, rows)) return;
        if (int8_group(x, targets, rows)) return;
        bool shared = targets.size() <= size_t(cuda::kGemvMaxSegments) && first.dtype != DType::F32;
        for (const MatmulTarget& t : targets) {
            const auto& w = static_cast<const CudaWeight&>(*t.w);
            shared = shared && !w.quant && !w.fp8_scale && w.dtype == first.dtype && w.cols == first.cols &&
                     w.ld == first.ld;
        }
        if (!shared) {  // one at a time, each with the bf16 copy of x if there is one
            const Bf16Copy copy = bf16_copy_;
            for (const MatmulTarget& t : targets) {
                bf16_copy_ = copy;
                matmul(x, *t.w, t.bias, rows, t.out);
            }
            return;
        }
        cuda::GemvTarget gemv[cuda::kGemvMaxSegments];
        for (size_t i = 0; i < targets.size(); ++i)
            gemv[i] = {static_cast<const CudaWeight&>(*targets[i].w).data, int32_t(targets[i].w->rows),
                       targets[i].out};
        const uint64_t gemm_moves = gemm_->buffer_moves();
        int64_t features = 0;
        for (const MatmulTarget& t : targets) features += t.w->rows;
        if (dense_gemv_takes(rows, features))
            cuda::launch_dense_gemv_group(x, rows, int32_t(first.cols), gemv, int32_t(targets.size()), first.dtype,
                                          first.ld, stream_);
        else
            gemm_->run_many(x, rows, first.cols, gemv, int32_t(targets.size()), first.dtype, first.ld,
                            bf16_copy_of(x, rows, first));
        if (gemm_->buffer_moves() != gemm_moves) workspace_moved();
        for (const MatmulTarget& t : targets)
            if (t.bias) cuda::launch_add_bias(t.out, t.bias, rows, t.w->rows, stream_);
        after_op();
    }

    // matmul_shared_input's FP8 matrices: false (nothing done) unless every
    // target is an FP8 matrix of first's row length. Up to kGemvMaxRows rows one
    // GEMV launch; above, the activations quantized once and a GEMM per target.
    bool fp8_group(const float* x, std::span<const MatmulTarget> targets, int32_t rows) {
        const auto& first = static_cast<const CudaWeight&>(*targets.front().w);
        if (targets.size() > size_t(cuda::kGemvMaxSegments)) return false;
        cuda::GemvTarget group[cuda::kGemvMaxSegments];
        const float* scales[cuda::kGemvMaxSegments];
        for (size_t i = 0; i < targets.size(); ++i) {
            const auto& w = static_cast<const CudaWeight&>(*targets[i].w);
            if (!w.fp8_scale || w.cols != first.cols) return false;
            group[i] = {w.data, int32_t(w.rows), targets[i].out};
            scales[i] = w.fp8_scale;
        }
        if (rows <= cuda::kGemvMaxRows) {
            cuda::launch_fp8_gemv_group(x, rows, int32_t(first.cols), group, scales, int32_t(targets.size()), stream_);
        } else {
            const uint64_t gemm_moves = gemm_->buffer_moves();
            gemm_->run_fp8_many(x, rows, first.cols, group, scales, int32_t(targets.size()));
            if (gemm_->buffer_moves() != gemm_moves) workspace_moved();
        }
        for (const MatmulTarget& t : targets)
            if (t.bias) cuda::launch_add_bias(t.out, t.bias, rows, t.w->rows, stream_);
        after_op();
        return true;
    }

    // matmul_shared_input at the GEMVs' row counts when some matrices take the
    // int8 GEMV (Q4_K, Q6_K, Q8_0): the input quantized to int8 once, and those of
    // the first such type in one launch (after the others, which go one at a
    // time). False (nothing done) when none does.
    bool int8_group(const float* x, std::span<const MatmulTarget> targets, int32_t rows) {
        if (rows > cuda::kQuantGemvMaxRows) return false;
        cuda::QType group_type{};
        cuda::GemvTarget group[cuda::kGemvMaxSegments];
        size_t member[cuda::kGemvMaxSegments];  // group[j] is targets[member[j]]
        int32_t count = 0;
        for (size_t i = 0; i < targets.size() && count < cuda::kGemvMaxSegments; ++i) {
            const auto& w = static_cast<const CudaWeight&>(*targets[i].w);
            if (w.quant && cuda::int8_gemv_takes(*w.quant) && (count == 0 || *w.quant == group_type)) {
                group[count] = {w.data, int32_t(w.rows), targets[i].out};
                member[count++] = i;
                group_type = *w.quant;
            }
        }
        if (count == 0) return false;
        const int64_t k = targets.front().w->cols;
        const void* act = int8_copy_of(x, rows, k);
        const Bf16Copy copy = bf16_copy_;
        const Int8Copy copy8 = int8_copy_;  // the others may read it too (a Q6_K attn_v beside Q4_K q/k)
        for (size_t i = 0, j = 0; i < targets.size(); ++i) {
            if (j < size_t(count) && member[j] == i) {
                ++j;
                continue;
            }
            bf16_copy_ = copy;
            int8_copy_ = copy8;
            matmul(x, *targets[i].w, targets[i].bias, rows, targets[i].out);
        }
        cuda::launch_int8_gemv_group(group_type, act, rows, int32_t(k), group, count, stream_);
        for (int32_t j = 0; j < count; ++j) {
            const MatmulTarget& t = targets[member[j]];
            if (t.bias) cuda::launch_add_bias(t.out, t.bias, rows, t.w->rows, stream_);
        }
        after_op();
        return true;
    }

    // x quantized to int8 for launch_int8_gemv_group: the copy the op before
    // wrote (int8_copy_target), or quantized now into the same buffer.
    const void* int8_copy_of(const float* x, int32_t rows, int64_t cols) {
        const Int8Copy& c = int8_copy_;
        if (c.of == x && c.rows == rows && c.cols == cols) return int8_act_.get();
        void* act = int8_buffer(rows, cols);
        cuda::launch_quantize_int8(x, rows, int32_t(cols), act, stream_);
        int8_copy_ = {x, rows, cols};  // for the other matrices of a shared input
        return act;
    }

    void swiglu(const float* gate, const float* up, int32_t rows, int32_t dim, float* out) override {
        void* out16 = bf16_copy_target(rows, dim);
        if (cuda::launch_swiglu(gate, up, int64_t(rows) * dim, out, out16, int8_copy_target(rows, dim), stream_))
            made_int8_copy(out, rows, dim);
        made_bf16_copy(out, rows, dim, out16);
        after_op();
    }

    void geglu(const float* gate, const float* up, int32_t rows, int32_t dim, float* out) override {
        void* out16 = bf16_copy_target(rows, dim);
        if (cuda::launch_geglu(gate, up, int64_t(rows) * dim, out, out16, int8_copy_target(rows, dim), stream_))
            made_int8_copy(out, rows, dim);
        made_bf16_copy(out, rows, dim, out16);
        after_op();
    }

    void scale(float* x, int64_t n, float s) override {
        cuda::launch_scale(x, n, s, stream_);
        after_op();
    }

    void gather_logit_rows(const float* x, int32_t dim, float* out) override {
        cuda::launch_gather_rows(step_, x, dim, out, stream_);
        after_op();
    }

    // Every row is sampled on the device (device_sampler.cpp, sampling_device.cu),
    // as the reference sampler does; only the ids come back.
    void sample(float* logits, int32_t vocab, std::span<const SamplingRow> rows, int32_t* out_ids) override {
        traffic_.host_to_device_bytes += int64_t(sampler_->sample(logits, vocab, rows, out_ids));
        traffic_.device_to_host_bytes += int64_t(rows.size() * sizeof(int32_t));
        after_op();
        end_step();
    }

    bool can_record() const override { return !cuda_options_.sync_each_op; }

    void run_recorded(uint64_t key, const std::function<void()>& ops) override {
        Recording& r = recordings_[key];
        if (r.exec) {
            CUDA_CHECK(cudaGraphLaunch(r.exec, stream_));
            return;
        }
        if (r.eager_runs++ == 0) {  // the first run sizes the workspaces and picks the GEMM algorithms
            ops();
            return;
        }
        // Capture, relaunching nothing: a workspace that grew during capture
        // would leave the recording pointing at freed memory, so growth throws there.
        const uint64_t generation = workspace_generation_;
        cudaGraph_t graph = nullptr;
        CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
        capturing_ = true;
        try {
            ops();
        } catch (...) {
            capturing_ = false;
            cudaStreamEndCapture(stream_, &graph);
            if (graph) cudaGraphDestroy(graph);
            throw;
        }
        capturing_ = false;
        CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
        if (generation != workspace_generation_) throw std::logic_error("cuda: a workspace grew while recording a step");
        const cudaError_t instantiated = cudaGraphInstantiate(&r.exec, graph, 0);
        cudaGraphDestroy(graph);
        CUDA_CHECK(instantiated);
        ++traffic_.recordings;
        CUDA_CHECK(cudaGraphLaunch(r.exec, stream_));
    }

    StepTraffic traffic() const override { return traffic_; }
    double device_idle_seconds() const override { return traffic_.idle_seconds_total; }
    void wait_for_work() override { have_last_end_ = false; }
    void profiler_range(bool collect) override {
        synchronize();
        CUDA_CHECK(collect ? cudaProfilerStart() : cudaProfilerStop());
    }
    void* native_stream() const override { return stream_; }

    void reset_traffic() override {
        const int32_t recordings = traffic_.recordings;
        traffic_ = {};
        traffic_.recordings = recordings;
        have_last_end_ = false;
    }

private:
    // --quantization fp8 converts the transformer layers' dense matrices ("blk.*";
    // not the embedding table nor the LM head, as vLLM) whose rows are whole
    // 16-byte words, as cuBLASLt's FP8 kernels need; the others load as usual.
    // The matrix v, its rows `pitch` bytes apart in host memory.
    std::unique_ptr<PackedWeight> upload_weight(const WeightView& v, size_t pitch) {
        auto w = std::make_unique<CudaWeight>();
        w->name = v.name;
        w->type = v.type;
        w->rows = v.rows;
        w->cols = v.cols;
        w->dtype = dtype_of(v);
        // The layers' GEMMs that read bf16 activations from which row count on (see bf16_copy_target).
        if (v.name.rfind("blk.", 0) == 0 && w->dtype == DType::BF16 && !converts_to_fp8(v))
            bf16_copy_min_rows_ = std::min(bf16_copy_min_rows_, quant_type_of(v.type) ? cuda::kQuantMmaMaxRows + 1
                                                                                      : kDenseGemvMaxRows + 1);
        if ((w->quant = quant_type_of(v.type))) {
            // Q8_0 rows of whole runs of 8 blocks are regrouped for 16-byte loads (quant_blocks.cuh).
            if (*w->quant == cuda::QType::Q8_0 && v.cols % cuda::quant_block_elems(cuda::QType::Q8_0x8) == 0)
                w->quant = cuda::QType::Q8_0x8;
            if (v.name.rfind("blk.", 0) == 0 && cuda::int8_gemv_takes(*w->quant)) int8_layers_ = true;
            // Kept quantized; prefill widens it into a shared bf16 scratch of the largest such matrix.
            if (v.cols % cuda::quant_block_elems(*w->quant))
                throw std::invalid_argument("cuda: weight '" + v.name + "' has rows that are not whole blocks");
            w->ld = v.cols;  // a multiple of 32
            w->data = upload_blocks(v.data, pitch, v.type, *w->quant, v.rows, v.cols);
            const size_t widened = size_t(v.rows) * w->ld * 2;
            if (widened > scratch_bytes_) {
                synchronize();
                free(scratch_);
                scratch_ = alloc(widened);
                scratch_bytes_ = widened;
            }
            synchronize();
            return w;
        }
        if (converts_to_fp8(v)) {
            pack_fp8(*w, v, pitch);
            return w;
        }
        w->ld = w->dtype == DType::F32 ? v.cols : (v.cols + 7) / 8 * 8;
        const size_t elem = w->dtype == DType::F32 ? 4 : 2;
        const size_t bytes = size_t(v.rows) * w->ld * elem;
        w->data = alloc(bytes);
        if (w->ld != v.cols) CUDA_CHECK(cudaMemsetAsync(w->data, 0, bytes, stream_));
        CUDA_CHECK(cudaMemcpy2DAsync(w->data, w->ld * elem, v.data, pitch, v.cols * elem, v.rows,
                                     cudaMemcpyHostToDevice, stream_));
        synchronize();
        return w;
    }

    // A quantized matrix (rows of `cols` weights, `pitch` bytes apart on the host)
    // uploaded in the device's block layout and padded to whole 16-byte words,
    // which the GEMVs read: the file's blocks, except Q6_K's padded to 224 bytes
    // and Q8_0x8's 8 file blocks regrouped (quant_blocks.cuh).
    void* upload_blocks(const uint8_t* src, size_t pitch, GGMLType type, cuda::QType quant, int64_t rows, int64_t cols) {
        const auto* traits = ggml_type_traits(uint32_t(type));
        const size_t file_block = size_t(traits->block_bytes), block = size_t(cuda::quant_block_bytes(quant));
        const int64_t per_block = cuda::quant_block_elems(quant) / traits->block_elems;  // file blocks a device block
        const int64_t blocks = cols / cuda::quant_block_elems(quant);
        const size_t row = quant_row_bytes(quant, cols), bytes = size_t(rows) * row, padded = (bytes + 15) / 16 * 16;
        void* dst = alloc(padded);
        CUDA_CHECK(cudaMemsetAsync(static_cast<char*>(dst) + bytes, 0, padded - bytes, stream_));
        if (block == file_block && per_block == 1) {
            CUDA_CHECK(cudaMemcpy2DAsync(dst, row, src, pitch, row, size_t(rows), cudaMemcpyHostToDevice, stream_));
            synchronize();
            return dst;
        }
        std::vector<uint8_t> staged(bytes, 0);  // Q6_K's padding stays zero
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t b = 0; b < blocks; ++b) {
                uint8_t* to = &staged[size_t(r) * row + size_t(b) * block];
                const uint8_t* from = src + size_t(r) * pitch + size_t(b * per_block) * file_block;
                if (quant == cuda::QType::Q8_0x8) {
                    for (int64_t i = 0; i < per_block; ++i) {  // Q8_0: an fp16 scale, then 32 quants
                        std::memcpy(to + 2 * i, from + i * file_block, 2);
                        std::memcpy(to + 16 + 32 * i, from + i * file_block + 2, 32);
                    }
                } else {
                    std::memcpy(to, from, file_block);
                }
            }
        CUDA_CHECK(cudaMemcpyAsync(dst, staged.data(), bytes, cudaMemcpyHostToDevice, stream_));
        synchronize();  // before staged goes
        return dst;
    }

    bool converts_to_fp8(const WeightView& v) const {
        if (options_.quantization != WeightQuantization::FP8 || v.name.rfind("blk.", 0) != 0) return false;
        if (v.type != GGMLType::F32 && v.type != GGMLType::F16 && v.type != GGMLType::BF16) return false;
        return v.rows > 0 && v.cols > 0 && v.cols % 16 == 0 && v.rows % 4 == 0;
    }

    // Uploads the weight as it is into a temporary buffer and converts it on the device.
    void pack_fp8(CudaWeight& w, const WeightView& v, size_t pitch) {
        const size_t elem = w.dtype == DType::F32 ? 4 : 2;
        const size_t count = size_t(v.rows) * size_t(v.cols);
        void* staged = alloc(count * elem);
        try {
            w.ld = v.cols;
            w.data = alloc(count + 16);  // then the scale and an amax scratch (count is a multiple of 16)
            w.fp8_scale = reinterpret_cast<float*>(static_cast<uint8_t*>(w.data) + count);
            CUDA_CHECK(cudaMemcpy2DAsync(staged, size_t(v.cols) * elem, v.data, pitch, size_t(v.cols) * elem, v.rows,
                                         cudaMemcpyHostToDevice, stream_));
            cuda::launch_fp8_quantize_weight(staged, w.dtype, v.rows, v.cols, static_cast<uint8_t*>(w.data),
                                             w.fp8_scale, w.fp8_scale + 1, stream_);
            synchronize();
        } catch (...) {
            free(staged);
            throw;
        }
        free(staged);
        w.converted_bytes = count;
    }

    struct Recording {
        cudaGraphExec_t exec = nullptr;
        int32_t eager_runs = 0;
    };

    // Recordings hold the addresses of every buffer they use: when one moves, they all go.
    void workspace_moved() {
        if (capturing_) throw std::logic_error("cuda: a workspace grew while recording a step");
        ++workspace_generation_;
        drop_recordings();
    }
    void drop_recordings() {
        for (auto& [key, r] : recordings_)
            if (r.exec) cudaGraphExecDestroy(r.exec);
        recordings_.clear();
    }

    // Closes a step after its ids came back: its end on the device timeline,
    // and the idle gap before it began (the previous step's end to its start).
    void end_step() {
        if (!step_open_) return;
        step_open_ = false;
        cudaEvent_t end = step_end_[traffic_.steps % 2];
        CUDA_CHECK(cudaEventRecord(end, stream_));
        CUDA_CHECK(cudaEventSynchronize(end));
        if (have_last_end_) {
            float ms = 0;
            CUDA_CHECK(cudaEventElapsedTime(&ms, step_end_[(traffic_.steps + 1) % 2], step_begin_));
            const double gap_us = std::max(0.0, double(ms) * 1e3);
            auto& gaps = traffic_.idle_gaps_us;
            if (gaps.size() >= kMaxIdleGaps) gaps.erase(gaps.begin(), gaps.begin() + kMaxIdleGaps / 2);
            gaps.push_back(gap_us);
            traffic_.idle_seconds_total += gap_us * 1e-6;
        }
        have_last_end_ = true;
        ++traffic_.steps;
    }

    static cuda::PoolType pool_type(const KVCache& cache) {
        return cache.shape.dtype == KVDType::BF16 ? cuda::PoolType::BF16 : cuda::PoolType::F32;
    }

    static void check_heads(const AttentionParams& a) {
        if (a.n_kv_heads <= 0 || a.n_heads % a.n_kv_heads != 0)
            throw std::invalid_argument("cuda: n_heads must be a positive multiple of n_kv_heads");
        if (a.head_dim <= 0 || a.head_dim > cuda::kMaxHeadDim)
            throw std::invalid_argument("cuda: head sizes up to 256 are supported");
    }

    // ---- an activation written twice: as float and, rounded, as bf16 ----------
    // The bf16 GEMMs (cuBLASLt) read bf16 activations. The norms and SwiGLU
    // that produce their inputs write them a second time as bf16 into the
    // GEMM's input buffer, so the GEMM that reads them next skips its
    // conversion pass (a 512-row prefill's four conversions took 56 us a layer).
    // A copy is good for the next op only; MINFER_FUSED_CONVERT=0 turns this off.
    struct Bf16Copy {
        const float* of = nullptr;  // the float activation it copies
        int32_t rows = 0;
        int64_t cols = 0;
        const void* data = nullptr;
    };

    // Where an op producing rows x cols writes its bf16 copy, or null when no
    // bf16 GEMM of the layers would read one at this row count.
    void* bf16_copy_target(int32_t rows, int64_t cols) {
        if (!cuda_options_.fused_convert || rows < bf16_copy_min_rows_) return nullptr;
        const uint64_t moves = gemm_->buffer_moves();
        void* p = gemm_->bf16_input(rows, cols);
        if (gemm_->buffer_moves() != moves) workspace_moved();
        return p;
    }
    void made_bf16_copy(const float* of, int32_t rows, int64_t cols, const void* data) {
        if (!data) return;
        bf16_copy_ = {of, rows, cols, data};
        bf16_copy_fresh_ = true;
    }
    // The same for the int8 GEMVs (gemv_int8.cu) at up to kQuantGemvMaxRows rows:
    // a norm or SwiGLU whose output one of them reads next quantizes it as it
    // writes it, saving the quantization launch. The copy lives in int8_act_.
    struct Int8Copy {
        const float* of = nullptr;
        int32_t rows = 0;
        int64_t cols = 0;
    };
    void* int8_buffer(int32_t rows, int64_t cols) {
        const size_t bytes = cuda::int8_act_bytes(rows, int32_t(cols));
        if (bytes > int8_act_.bytes()) workspace_moved();
        int8_act_.ensure(bytes, stream_);
        return int8_act_.get();
    }
    void* int8_copy_target(int32_t rows, int64_t cols) {
        if (!cuda_options_.fused_convert || !int8_layers_ || rows > cuda::kQuantGemvMaxRows || cols % 256) return nullptr;
        return int8_buffer(rows, cols);
    }
    void made_int8_copy(const float* of, int32_t rows, int64_t cols) {
        int8_copy_ = {of, rows, cols};
        int8_copy_fresh_ = true;
    }
    // Device memory changed from the host: a cached copy's activation may now hold something else.
    void forget_copies() {
        bf16_copy_ = {};
        int8_copy_ = {};
    }

    // The bf16 copy of x that the op before made, if a bf16 GEMM of w can read it as its input.
    const void* bf16_copy_of(const float* x, int32_t rows, const CudaWeight& w) const {
        const Bf16Copy& c = bf16_copy_;
        const bool fits = c.data && c.of == x && c.rows == rows && c.cols == w.cols && w.ld == w.cols &&
                          w.dtype == DType::BF16;
        return fits ? c.data : nullptr;
    }

    void after_op() {
        if (!bf16_copy_fresh_) bf16_copy_ = {};
        bf16_copy_fresh_ = false;
        if (!int8_copy_fresh_) int8_copy_ = {};
        int8_copy_fresh_ = false;
        if (cuda_options_.sync_each_op) synchronize();
    }

    cudaStream_t stream_ = nullptr;
    cudaEvent_t step_copied_ = nullptr;
    // bf16 widening of a quantized weight for a prefill GEMM; the quantized GEMM's bf16
    // activations and partial sums (batched decode)
    void* scratch_ = nullptr;
    size_t scratch_bytes_ = 0;
    std::unique_ptr<cuda::CublasLtGemm> gemm_;
    int32_t bf16_copy_min_rows_ = std::numeric_limits<int32_t>::max();
    Bf16Copy bf16_copy_;
    bool bf16_copy_fresh_ = false;  // made by the op running now
    bool int8_layers_ = false;      // some layer matrix takes the int8 GEMV (int8_copy_target)
    Int8Copy int8_copy_;
    bool int8_copy_fresh_ = false;
    BackendOptions options_;
    cuda::CudaOptions cuda_options_;  // the MINFER_* switches, read once at creation

    // The current step: its arrays in one device buffer, staged through pinned memory.
    cuda::DeviceStep step_;
    int32_t* step_dev_ = nullptr;
    int32_t* step_host_ = nullptr;
    size_t step_capacity_ = 0;
    const int32_t* host_token_ids_ = nullptr;  // in step_host_, for the vocabulary check

    std::unique_ptr<cuda::DeviceSampler> sampler_;

    std::vector<int32_t> attn_tiles_;  // (sequence, first row, rows) triples of the current step
    cuda::DeviceBuffer attn_ws_;  // paged attention's split partials (only grows)
    cuda::DeviceBuffer moe_ws_;   // the MoE FFN's sorted pairs and per-pair activations (only grows)
    cuda::DeviceBuffer int8_act_;  // a matmul's input quantized to int8 (int8_copy_of; only grows)

    // Recorded steps (CUDA graphs) by bucket key.
    std::unordered_map<uint64_t, Recording> recordings_;
    uint64_t workspace_generation_ = 0;
    bool capturing_ = false;

    // Step timeline and traffic.
    StepTraffic traffic_;
    cudaEvent_t step_begin_ = nullptr;
    cudaEvent_t step_end_[2] = {};
    bool step_open_ = false;
    bool have_last_end_ = false;
};

}  // namespace

namespace {
std::string fmt_count(int count) { return std::to_string(count) + (count == 1 ? " GPU" : " GPUs"); }

// The number of GPUs, or why there is none (a machine without a driver, a driver too old).
int device_count(std::string& why) {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        why = cudaGetErrorString(err);
        return 0;
    }
    if (count <= 0) why = "no GPU found";
    return count;
}
}  // namespace

int cuda_device_for(const World& world) {
    std::string why;
    const int count = device_count(why);
    if (count <= 0) throw std::runtime_error("no CUDA device answers: " + why);
    return std::max(0, world.local_rank) % count;
}

std::string cuda_status() {
    std::string why;
    const int count = device_count(why);
    if (count <= 0) return "no device answers (" + why + ")";
    try {
        return fmt_count(count) + ", the first: " + cuda_device_summary(0);
    } catch (const std::exception& e) {
        return fmt_count(count) + " (" + e.what() + ")";
    }
}

std::unique_ptr<Backend> make_cuda_backend(int device, const BackendOptions& options) {
    return std::make_unique<CudaBackend>(device, options);
}

std::string cuda_device_summary(int device) {
    cudaDeviceProp p{};
    CUDA_CHECK(cudaGetDeviceProperties(&p, device));
    int runtime = 0, driver = 0;
    CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    CUDA_CHECK(cudaDriverGetVersion(&driver));
    char line[512];
    std::snprintf(line, sizeof line, "%s, sm_%d%d, %d SMs, %.1f GiB, L2 %d MiB; CUDA runtime %d.%d, driver %d.%d",
                  p.name, p.major, p.minor, p.multiProcessorCount, double(p.totalGlobalMem) / (1u << 30),
                  p.l2CacheSize >> 20, runtime / 1000, runtime % 1000 / 10, driver / 1000, driver % 1000 / 10);
    return line;
}

}  // namespace minfer
