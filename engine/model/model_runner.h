// ModelRunner: one forward pass over a step plan, then sampling.
//
// It owns the KV pool and the activation workspace, both sized once from the
// limits, so nothing is allocated inside a step.
//
// Tensor parallelism lives here, as nano-vllm keeps it in its runner: on a
// model loaded with a group, rank 0's runner is the one the engine drives.
// It sends its limits to the other ranks when it is made, each step's plan
// before it runs the step, and word of its end; the other ranks wait in
// serve_workers(), running the same steps on their shards. The logits come
// together on every rank (all-gather), and rank 0 samples.
//
// On a backend that records steps (CUDA graphs), a step whose sequences all
// have the same number of rows, each wanting logits (decodes: one row; the
// verification step of speculative decoding: the last token and k drafts), is
// padded to a bucket of sequences (1, 2, 4, 8, then multiples of 8) and of
// context (a power of two of tokens), and its launches are recorded once per
// bucket and replayed after. --enforce-eager runs the same padded steps
// without recording, so both modes compute the very same numbers.
#pragma once

#include <cstdint>
#include <span>
#include <optional>
#include <vector>

#include "kernels/backend.h"
#include "engine/model/layer_program.h"
#include "engine/model/model.h"

namespace minfer {

struct RunnerLimits {
    int32_t max_num_batched_tokens = 512;  // rows in one step
    int32_t max_num_seqs = 64;             // sequences in one step
    int32_t num_kv_blocks = 0;             // blocks in the KV pool
    int32_t block_size = 16;               // tokens per block
    int32_t max_logits_rows = 0;           // rows of logits in one step (0: max_num_seqs)
    bool enforce_eager = false;            // never record steps (no CUDA graphs)
    KVDType kv_dtype = KVDType::F32;       // the KV pool's elements
};

// The KV element type a runner on `backend` uses: `requested`, or the backend's
// default when unset. Throws std::invalid_argument if the backend cannot run it.
KVDType resolve_kv_dtype(const Backend& backend, std::optional<KVDType> requested);

// The bucket of a step for recording: sequences and context padded up, every
// sequence with rows_per_seq rows. seqs == 0: the step is not recorded.
struct DecodeBucket {
    int32_t seqs = 0;
    int32_t rows_per_seq = 1;    // 1 for decodes, 1 + k on a verification step
    int32_t blocks_per_seq = 0;  // block-table width: the context bucket in blocks
    int32_t rows() const { return seqs * rows_per_seq; }
    uint64_t key() const {
        return uint64_t(uint32_t(seqs)) << 32 | uint64_t(uint32_t(rows_per_seq)) << 24 | uint32_t(blocks_per_seq);
    }
};
constexpr int32_t kMaxRecordedRows = 512;
// A verification step: the last token and up to 16 drafts (spec_config.h's limit).
constexpr int32_t kMaxRecordedRowsPerSeq = 17;
// The bucket for n sequences (0 when n is over max_seqs).
int32_t decode_rows_bucket(int32_t n, int32_t max_seqs);
// The bucket a plan is recorded under on a backend that records (seqs == 0:
// run it as it is): every sequence has the same rows, each wanting its logits.
DecodeBucket decode_bucket(const StepPlan& plan, const RunnerLimits& limits);
// The plan padded to the bucket: extra sequences of rows_per_seq rows at
// positions 0.. with no KV slot (-1), whose block tables point at block 0;
// every row wants logits.
StepPlan pad_decode_plan(const StepPlan& plan, const DecodeBucket& bucket);

// What a runner split over ranks moved, and how evenly expert parallelism
// spread the experts' work (counted on rank 0; empty in a world of one).
struct ParallelStats {
    int32_t ranks = 1;
    int64_t steps = 0;
    int64_t floats_all_reduced = 0;  // by this rank, every step
    // Expert parallelism, over the steps run without recording (a CUDA graph
    // cannot stop to copy the routing to the host): the (row, expert) pairs
    // each rank's experts ran, all layers, and per step the busiest rank's
    // pairs over the mean (1: even).
    std::vector<int64_t> expert_pairs;
    int64_t balance_steps = 0;
    double imbalance_sum = 0, imbalance_max = 0;
    double imbalance_mean() const { return balance_steps ? imbalance_sum / double(balance_steps) : 0.0; }
};

// Bytes the runner allocates for its activations (the KV pool aside).
size_t runner_workspace_bytes(const ModelConfig& config, const RunnerLimits& limits);

class ModelRunner {
public:
    ModelRunner(const Model& model, RunnerLimits limits);
    ~ModelRunner();

    // The ranks other than 0 of a tensor-parallel model: run the runners and
    // steps rank 0's runners send, until rank 0 calls release_workers.
    static void serve_workers(const Model& model);
    // Rank 0: ends the other ranks' serve_workers (after its last runner is gone).
    static void release_workers(const Group& group);
    ModelRunner(const ModelRunner&) = delete;
    ModelRunner& operator=(const ModelRunner&) = delete;

    const RunnerLimits& limits() const { return limits_; }
    const Model& model() const { return model_; }

    // Runs the model over the plan; logits of plan.logits_rows stay on the backend.
    void forward(const StepPlan& plan);
    // Samples one token for each of the first rows.size() logits rows of the last
    // forward (rows[i] for logits row i); later rows are only read through logits().
    std::vector<int32_t> sample(std::span<const SamplingRow> rows);
    // Copies the last forward's logits to the host: [logits_rows][vocab].
    std::vector<float> logits() const;
    ParallelStats parallel_stats() const;

    // Disaggregation's KV transfer: the K and V of whole blocks of one layer,
    // copied out to (or in from) host memory, blocks one after another in the
    // order given (bytes_per_block() each). Between steps only. A tensor-
    // parallel runner holds only its ranks' heads: a transfer needs a world of one.
    const KVCacheShape& kv_shape() const { return cache_.shape; }
    void read_kv_blocks(std::span<const int32_t> blocks, int32_t layer, void* k_out, void* v_out) const;
    void write_kv_blocks(std::span<const int32_t> blocks, int32_t layer, const void* k_in, const void* v_in);

private:
    // forward() once the plan is checked (and sent to the other ranks).
    void forward_step(const StepPlan& plan);
    // Every launch of a forward over the current step of n rows, logits_rows of
    // which want logits (the MoE layers' routing counted into expert_load, if set).
    void run_layers(int32_t n, int32_t logits_rows, ExpertLoad* expert_load = nullptr);
    // Adds the step's expert_load_ to parallel_.
    void count_expert_load();
    // Tensor parallelism: each rank's columns of the logits, gathered into logits_.
    void gather_logits(int32_t rows);
    // Rank 0 of a group tells the other ranks (serve_workers) what to do; the others never send.
    bool sends_to_workers() const { return group_ && group_->is_root(); }

    const Model& model_;
    Backend& backend_;
    const Group* group_;  // the model's tensor-parallel group (null: a world of one)
    RunnerLimits limits_;
    // In the top bits of this runner's recording keys: two runners on one
    // backend (a target and its draft model) must not replay each other's steps.
    uint64_t recording_tag_;
    LayerProgram program_;  // the architecture's layer (layer_program.h)
    KVCache cache_;
    int32_t num_logit_rows_ = 0;
    StepPlan padded_;  // the current step padded to its bucket

    // Workspace, [max_num_batched_tokens x width] each.
    float* residual_ = nullptr;
    float* normed_ = nullptr;
    float* q_ = nullptr;
    float* k_ = nullptr;
    float* v_ = nullptr;
    float* attn_ = nullptr;
    float* proj_ = nullptr;
    float* gate_ = nullptr;
    float* up_ = nullptr;
    float* hidden_ = nullptr;
    LayerBuffers moe_;  // a MoE model's buffers (router_logits and after)
    ParallelStats parallel_;
    std::optional<ExpertLoad> expert_load_;  // rank 0 of an expert-parallel group
    float* last_rows_ = nullptr;   // [max_logits_rows x dim]
    float* logits_ = nullptr;      // [max_logits_rows x vocab]
    // Tensor parallelism: this rank's logits [max_logits_rows x vocab_shard]
    // and every rank's, gathered [ranks x max_logits_rows x vocab_shard], where
    // vocab_shard is the widest rank's part of the vocabulary.
    int32_t vocab_shard_ = 0;
    float* shard_logits_ = nullptr;
    float* gathered_logits_ = nullptr;
    std::vector<void*> allocations_;
};

}  // namespace minfer
