// The Backend interface: the fused ops a forward pass is made of.
//
// kernels/cpu is the reference; kernels/cuda implements the same contract, and
// tests compare the two op by op. Pointers passed to ops live in the
// backend's memory (host memory for the CPU, device memory for CUDA).
// Activations are float32 for now ("act" below); weights are packed by each
// backend its own way behind PackedWeight.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/formats/ggml_type.h"
#include "kernels/sampling.h"
#include "kernels/step_plan.h"
#include "kernels/world.h"

namespace minfer {

// A weight matrix with `rows` output features of `cols` inputs each, as GGUF
// stores a Linear weight: ne = [cols, rows], row r contiguous.
struct WeightView {
    std::string name;
    GGMLType type;
    int64_t rows;
    int64_t cols;
    const uint8_t* data;  // host memory (usually the file mapping)
};

struct PackedWeight {
    virtual ~PackedWeight() = default;
    std::string name;
    GGMLType type;
    int64_t rows = 0;
    int64_t cols = 0;
    // Bytes the backend keeps for this matrix when it converted it at load
    // (--quantization fp8: one byte a weight); 0 when it is stored as in the file.
    uint64_t converted_bytes = 0;
};

// A layer's experts of a mixture-of-experts FFN: n_experts matrices of rows x
// cols each, stored as one 3-D GGUF tensor (ne = [cols, rows, n_experts],
// expert e's rows right after expert e-1's). Under expert parallelism a rank
// packs a slice of them: global ids first_expert .. first_expert + n_experts - 1.
struct PackedExperts {
    virtual ~PackedExperts() = default;
    std::string name;
    GGMLType type;
    int32_t first_expert = 0;
    int32_t n_experts = 0;
    int64_t rows = 0;  // per expert
    int64_t cols = 0;
};

// Fills x's name, type and per-expert shape from the 3-D tensor `all` of
// n_experts experts; throws invalid_argument (naming `backend`) when it does
// not split into them.
void set_expert_shape(PackedExperts& x, const WeightView& all, int32_t n_experts, const std::string& backend);

// What routes a row to its experts (llama.cpp's build_moe_ffn with softmax gating):
// the k largest probabilities of softmax(router logits), and whether the k are
// divided by their sum (qwen3moe, Mixtral) or kept as they are (qwen2moe).
struct MoeRouting {
    int32_t n_experts = 0;
    int32_t k = 0;
    bool renormalize = false;
};

// --quantization: how the CUDA backend stores the transformer layers' dense
// (F32/F16/BF16) weight matrices. FP8: E4M3 with one float scale per tensor,
// as vLLM's --quantization fp8 does; the embedding table and the LM head stay.
enum class WeightQuantization { None, FP8 };
struct BackendOptions {
    WeightQuantization quantization = WeightQuantization::None;
    // This process's rank: CUDA takes GPU local_rank % device count; the CPU
    // pool (threads <= 0) gets this rank's share of the node's cores.
    World world;
};

// The KV pool's element type (--kv-cache-dtype). BF16 halves the pool: twice
// the tokens fit, and decode attention reads half the bytes. Keys and values
// are rounded to bf16 (to nearest even) when written and widened when read.
enum class KVDType { F32, BF16 };
inline size_t kv_dtype_bytes(KVDType t) { return t == KVDType::BF16 ? 2 : 4; }
inline const char* kv_dtype_name(KVDType t) { return t == KVDType::BF16 ? "bfloat16" : "float32"; }

// The paged KV pool: for each layer, K and V blocks of shape
// [num_blocks][block_size][n_kv_heads][head_dim] elements of `dtype`. kvcache/
// decides which block holds which tokens; only kernels touch the data.
struct KVCacheShape {
    int32_t n_layers = 0;
    int32_t num_blocks = 0;
    int32_t block_size = 16;
    int32_t n_kv_heads = 0;
    int32_t head_dim = 0;
    KVDType dtype = KVDType::F32;
    size_t elems_per_block() const { return size_t(block_size) * n_kv_heads * head_dim; }
    size_t bytes_per_block() const { return elems_per_block() * kv_dtype_bytes(dtype); }
    size_t bytes_per_layer() const { return bytes_per_block() * num_blocks; }
};

struct KVCache {
    KVCacheShape shape;
    std::vector<void*> k;  // per layer: elements of shape.dtype
    std::vector<void*> v;
};

// Backend::copy_kv_blocks's walk, shared by the backends: checks that the
// (src, dst) pairs are whole pairs of block ids within the pool (throws
// std::invalid_argument otherwise), then calls copy(dst, src, bytes) once per
// pair, layer and pool (K, then V), in that order.
void check_kv_block_pairs(const KVCacheShape& shape, std::span<const int32_t> src_dst_pairs);
template <class CopyBlock>
void for_each_kv_block_copy(const KVCache& cache, std::span<const int32_t> src_dst_pairs, CopyBlock&& copy) {
    check_kv_block_pairs(cache.shape, src_dst_pairs);
    const size_t bytes = cache.shape.bytes_per_block();
    for (size_t i = 0; i + 1 < src_dst_pairs.size(); i += 2)
        for (int32_t l = 0; l < cache.shape.n_layers; ++l)
            for (void* pool : {cache.k[l], cache.v[l]}) {
                auto* base = static_cast<char*>(pool);
                copy(base + size_t(src_dst_pairs[i + 1]) * bytes, base + size_t(src_dst_pairs[i]) * bytes, bytes);
            }
}

// Backend::kv_blocks_to_host/from_host's walk: checks the layer and blocks
// (std::out_of_range), then calls copy(i, K of block i, V of block i, bytes)
// for each block in order, with pointers into the layer's pools.
void for_each_kv_block_io(const KVCache& cache, std::span<const int32_t> blocks, int32_t layer, const char* what,
                          const std::function<void(size_t i, char* k, char* v, size_t bytes)>& copy);

struct RopeParams {
    int32_t n_rot = 0;              // dimensions rotated (<= head_dim)
    float base = 10000.0f;
    bool neox = false;              // pairs (i, i + n_rot/2) instead of (2i, 2i+1)
    float position_scale = 1.0f;    // linear rope scaling: position / factor
    const float* freq_factors = nullptr;  // n_rot/2 divisors (llama3 rope_freqs), backend memory
};

struct AttentionParams {
    int32_t n_heads = 0;
    int32_t n_kv_heads = 0;
    int32_t head_dim = 0;
    float scale = 1.0f;      // usually 1/sqrt(head_dim)
    int32_t window = 0;      // sliding window in tokens; 0 = the whole context
};

class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;

    // Memory. alloc never returns nullptr (it throws); free(nullptr) is a no-op.
    virtual void* alloc(size_t bytes) = 0;
    virtual void free(void* p) = 0;
    virtual void upload(void* dst, const void* src, size_t bytes) = 0;
    virtual void download(void* dst, const void* src, size_t bytes) = 0;
    // rows of width_bytes from src (rows src_pitch bytes apart) to dst (dst_pitch
    // apart), both in backend memory, in the ops' order: the tensor-parallel LM
    // head puts each rank's columns of the logits in place.
    virtual void copy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width_bytes,
                         size_t rows) = 0;
    virtual void synchronize() {}
    // The KV pool element types this backend's rope_kv_write and paged_attention
    // handle, and the one --kv-cache-dtype auto picks.
    virtual bool supports_kv_dtype(KVDType t) const { return t == KVDType::F32; }
    virtual KVDType default_kv_dtype() const { return KVDType::F32; }
    // Bytes the KV pool may take at most: free host RAM, or free device memory.
    virtual size_t available_memory() const = 0;
    // All the memory of the device (host RAM for the CPU): --gpu-memory-utilization is a fraction of it.
    virtual size_t total_memory() const = 0;

    // Weights: matrices are packed the backend's way; vectors (norm weights,
    // biases, rope factors) are uploaded as float32. `shard` picks a part of
    // the matrix (kernels/world.h: row shards for column-parallel layers,
    // column shards on quant-block boundaries for row-parallel ones); the
    // packed weight then has the shard's rows and cols. The default is the
    // whole matrix.
    virtual std::unique_ptr<PackedWeight> pack_weight(const WeightView& w, const ShardSpec& shard = {}) = 0;
    float* upload_vector(std::span<const float> v);

    // Makes `plan` the current step: its arrays are copied to the backend once,
    // and the ops below read positions, slots and block tables from there.
    virtual void set_step(const StepPlan& plan, int32_t block_size) = 0;

    // Copies whole KV blocks, K and V of every layer: pairs (src, dst) of block
    // ids. Copy-on-write in kvcache/ asks for these before a step writes into a
    // block that another sequence still holds.
    virtual void copy_kv_blocks(KVCache& cache, std::span<const int32_t> src_dst_pairs) = 0;
    // Disaggregation's KV transfer: one layer's K and V of whole blocks to
    // host memory (blocks one after another, bytes_per_block() each, in the
    // order given), and back. Returns once the copies are done. The default
    // copies block by block with download/upload; a GPU queues them all and
    // waits once.
    virtual void kv_blocks_to_host(const KVCache& cache, std::span<const int32_t> blocks, int32_t layer, void* k_out,
                                   void* v_out);
    virtual void kv_blocks_from_host(KVCache& cache, std::span<const int32_t> blocks, int32_t layer, const void* k_in,
                                     const void* v_in);

    // ---- ops over the current step's rows (n = plan.num_tokens()) ----------

    // out[n, cols] = table rows of the step's token ids.
    // (table: the vocabulary's rows first_row .. first_row + rows - 1, a
    // vocabulary-parallel shard; an id outside them gives a row of zeros, a
    // negative one std::out_of_range. ModelRunner checks ids against the vocabulary.)
    virtual void embedding(const PackedWeight& table, int64_t first_row, float* out) = 0;
    // residual += delta (when delta is not null); out = rmsnorm(residual) * weight.
    virtual void add_rms_norm(float* residual, const float* delta, const float* weight, float eps,
                              int32_t rows, int32_t dim, float* out) = 0;
    // Rotates q [n, n_heads, hd] in place and k [n, n_kv_heads, hd], and writes
    // k and v into the layer's KV blocks at the step's slots (a slot of -1, a
    // padding row of a recorded step, writes nothing).
    virtual void rope_kv_write(float* q, const float* k, const float* v, const AttentionParams& attn,
                               const RopeParams& rope, KVCache& cache, int32_t layer) = 0;
    // out[n, n_heads*hd]: causal attention of each row over its sequence's
    // cached K/V (positions <= its own, within the window), through the block tables.
    virtual void paged_attention(const float* q, const AttentionParams& attn, const KVCache& cache,
                                 int32_t layer, float* out) = 0;
    // out[rows, w.rows] = x[rows, w.cols] * W^T (+ bias).
    virtual void matmul(const float* x, const PackedWeight& w, const float* bias, int32_t rows, float* out) = 0;
    // Several matmuls of one input (the q/k/v projections, gate and up), each
    // target's out = x * W^T (+ bias). The same results as one matmul per
    // target; a backend may share the work on x (one launch, one conversion).
    struct MatmulTarget {
        const PackedWeight* w = nullptr;
        const float* bias = nullptr;
        float* out = nullptr;
    };
    virtual void matmul_shared_input(const float* x, std::span<const MatmulTarget> targets, int32_t rows) {
        for (const MatmulTarget& t : targets) matmul(x, *t.w, t.bias, rows, t.out);
    }
    // out = silu(gate) * up, elementwise over rows*dim.
    virtual void swiglu(const float* gate, const float* up, int32_t rows, int32_t dim, float* out) = 0;
    // out = gelu(gate) * up, with GELU's tanh approximation (Gemma's gelu_pytorch_tanh).
    virtual void geglu(const float* gate, const float* up, int32_t rows, int32_t dim, float* out) = 0;
    // x[i] *= s for n floats (Gemma's embedding scale).
    virtual void scale(float* x, int64_t n, float s) = 0;

    // ---- mixture of experts (the defaults: this backend runs no MoE model) ----

    virtual bool supports_moe() const { return false; }
    // Packs a 3-D expert tensor: `all` views it as n_experts * rows_per_expert rows.
    virtual std::unique_ptr<PackedExperts> pack_experts(const WeightView& all, int32_t n_experts);
    // For each of `rows` rows of router logits [rows, n_experts]: the ids of its
    // k experts [rows, k], most probable first (a tie: the lower id), and their
    // weights [rows, k] as `routing` says.
    virtual void moe_route(const float* logits, int32_t rows, const MoeRouting& routing, int32_t* ids,
                           float* weights);
    // out[r] = sum over j < k, in that order, of weights[r, j] * FFN_e(x[r]) with
    // e = ids[r, j] and FFN_e(x) = down_e(silu(gate_e x) * up_e x). A row's
    // result does not depend on the other rows (batch invariance on the CPU).
    // ids are global: pairs whose expert is outside the packed slice (another
    // rank's, under expert parallelism) add nothing, and a row with none is 0.
    virtual void moe_experts(const float* x, const int32_t* ids, const float* weights, int32_t rows, int32_t k,
                             const PackedExperts& gate, const PackedExperts& up, const PackedExperts& down,
                             float* out);
    // out[r] += sigmoid(gate_logit[r]) * y[r] over rows of dim (qwen2moe's shared expert).
    virtual void add_sigmoid_gated(const float* gate_logit, const float* y, int32_t rows, int32_t dim, float* out);
    // out[i] = x[plan.logits_rows[i]] for the current step.
    virtual void gather_logit_rows(const float* x, int32_t dim, float* out) = 0;
    // Samples one token per row of logits [rows.size(), vocab]; the logits may be modified.
    virtual void sample(float* logits, int32_t vocab, std::span<const SamplingRow> rows, int32_t* out_ids) = 0;

    // ---- recorded steps (CUDA graphs) ------------------------------------------

    // True when run_recorded replays recordings; the runner then pads decode
    // steps to a few fixed shapes so that a handful of recordings serve them all.
    virtual bool can_record() const { return false; }
    // Runs ops, the launches of one step. A backend that records does the
    // first call for a key eagerly (it sizes workspaces and picks algorithms),
    // records the second and replays the recording from then on. The same key
    // must always mean the same ops with the same arguments, the step's own
    // data coming only through set_step's arrays (whose layout depends only on
    // the plan's shape).
    virtual void run_recorded(uint64_t key, const std::function<void()>& ops) {
        (void)key;
        ops();
    }

    // What crossed between host and device, and how long the device waited
    // between steps: a step runs from set_step to the end of sample.
    struct StepTraffic {
        int64_t steps = 0;
        int64_t host_to_device_bytes = 0;
        int64_t device_to_host_bytes = 0;
        int32_t recordings = 0;             // recorded steps (graphs) captured so far
        std::vector<double> idle_gaps_us;   // device idle time from one step's end to the next one's start
                                            // (the latest kMaxIdleGaps of them)
        double idle_seconds_total = 0;      // all of them, summed
    };
    static constexpr size_t kMaxIdleGaps = 65536;  // a server runs for days: the gaps kept are bounded
    virtual StepTraffic traffic() const { return {}; }
    // traffic().idle_seconds_total without copying the gaps (the engine reads it every step).
    virtual double device_idle_seconds() const { return 0.0; }
    // The engine has run out of work: the wait until the next step is for
    // requests, not the host's own overhead, so it is not an idle gap.
    virtual void wait_for_work() {}
    virtual void reset_traffic() {}
    // Starts (true) or stops (false) the device profiler's collection, after the
    // work queued so far: `ncu --profile-from-start off` then sees only what lies
    // between (CUDA: cudaProfilerStart/Stop). Nothing on the CPU.
    virtual void profiler_range(bool collect) { (void)collect; }
    // The CUDA stream the ops run on (a cudaStream_t), for NCCL's collectives
    // to queue behind them; null on the CPU.
    virtual void* native_stream() const { return nullptr; }
};

// MemAvailable and MemTotal of /proc/meminfo (0 if unknown).
size_t host_available_memory();
size_t host_total_memory();

// threads <= 0: one per core of the affinity mask (make_backend divides
// them among the node's ranks). pads_decode_steps: claim to record steps, so
// that the runner pads decode steps as it does for CUDA graphs (run_recorded
// still just runs the ops): tests check that path on the CPU.
std::unique_ptr<Backend> make_cpu_backend(int threads = 0, bool pads_decode_steps = false);

// "cpu", "cuda" (throws if this build has no CUDA or there is no GPU), or
// "auto": cuda when the build has it and a GPU answers, else cpu.
// cpu_threads: the CPU backend's pool size (<= 0: one per core).
// options.quantization FP8 needs the CUDA backend: with "cpu" (or "auto"
// finding no GPU) it throws std::invalid_argument.
std::unique_ptr<Backend> make_backend(const std::string& device, int cpu_threads = 0,
                                      const BackendOptions& options = {});

}  // namespace minfer
