// ModelRunner: one forward pass over a step plan, then sampling.
//
// It owns the KV pool and the activation workspace, both sized once from the
// limits, so nothing is allocated inside a step.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/backend.h"
#include "engine/model.h"

namespace minfer {

struct RunnerLimits {
    int32_t max_num_batched_tokens = 512;  // rows in one step
    int32_t max_num_seqs = 64;             // sequences in one step
    int32_t num_kv_blocks = 0;             // blocks in the KV pool
    int32_t block_size = 16;               // tokens per block
    int32_t max_logits_rows = 0;           // rows of logits in one step (0: max_num_seqs)
};

class ModelRunner {
public:
    ModelRunner(const Model& model, RunnerLimits limits);
    ~ModelRunner();
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

private:
    const Model& model_;
    Backend& backend_;
    RunnerLimits limits_;
    KVCache cache_;
    int32_t num_logit_rows_ = 0;

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
    float* last_rows_ = nullptr;   // [max_logits_rows x dim]
    float* logits_ = nullptr;      // [max_logits_rows x vocab]
    std::vector<void*> allocations_;
};

}  // namespace minfer
