#include "engine/core/bench_latency.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <random>
#include <stdexcept>

#include "engine/model/model_runner.h"
#include "engine/core/plan_builder.h"
#include "kvcache/block_manager.h"

namespace minfer {

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

namespace {

// Bytes of weights one decode step of `batch` rows reads: every matrix and
// vector, except that the embedding table is only gathered from (unless it is
// also the LM head), and of a MoE model's experts only the share the batch's
// tokens are expected to route to (ExpertWeights::fraction_read).
// Matrices the backend converted at load (--quantization fp8) count as stored.
double weight_bytes_per_step(const Model& model, int32_t batch) {
    double bytes = 0;
    for (const auto& t : model.file().tensors())
        if (t.name != "token_embd.weight" || model.config().tied_output) bytes += double(t.nbytes);
    const ExpertWeights experts = expert_weights(model.file());
    bytes -= (1.0 - experts.fraction_read(batch)) * double(experts.bytes);
    auto converted = [&](const std::unique_ptr<PackedWeight>& w) {
        if (!w || w->converted_bytes == 0) return;
        if (const GGUFTensorInfo* t = model.file().find_tensor(w->name))
            bytes += double(w->converted_bytes) - double(t->nbytes);
    };
    for (const LayerWeights& l : model.weights().layers)
        for (const auto* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) converted(*w);
    return bytes;
}

// Matmul FLOPs per token (2 per weight) plus causal attention over `len` tokens.
double prefill_flops(const ModelConfig& c, int32_t batch, int32_t len) {
    const double q = double(c.n_heads) * c.head_dim, kv = double(c.n_kv_heads) * c.head_dim;
    // The FFN's weights a token multiplies: the dense FFN, or the router, its k
    // experts and the shared expert.
    const double ffn = c.is_moe() ? 3.0 * c.dim * (double(c.moe.n_experts_used) * c.moe.expert_ffn_dim +
                                                   c.moe.shared_ffn_dim) + double(c.dim) * c.moe.n_experts
                                  : 3.0 * c.dim * c.ffn_dim;
    const double per_token = 2.0 * c.n_layers * (c.dim * (q + 2 * kv) + q * c.dim + ffn) +
                             2.0 * c.dim * c.vocab_size / len;  // logits for the last row only
    const double attention = 2.0 * 2.0 * c.n_layers * q * (double(len) * (len + 1) / 2);
    return batch * (per_token * len + attention);
}

}  // namespace

HardwareLimits hardware_limits(const std::string& backend_name, bool fp8_weights) {
    if (backend_name == "cuda") return {4.19e12, fp8_weights ? 1419e12 : 749e12};  // H200: README's measured figures
    return {};
}

LatencyResult bench_latency(const Model& model, const LatencyOptions& o) {
    const ModelConfig& c = model.config();
    if (o.batch <= 0 || o.input_len <= 0 || o.output_len < 0 || o.repetitions <= 0 || o.warmup < 0)
        throw std::invalid_argument("batch, input and repetitions must be > 0; output and warm-up >= 0");
    const int32_t total_len = o.input_len + o.output_len;
    if (total_len > c.context_len)
        throw std::invalid_argument("input + output length (" + std::to_string(total_len) +
                                    ") exceeds the model's context of " + std::to_string(c.context_len));
    const int32_t blocks_per_seq = (total_len + o.block_size - 1) / o.block_size;
    const int32_t num_blocks = o.batch * blocks_per_seq;
    const KVDType kv_dtype = resolve_kv_dtype(model.backend(), o.kv_dtype);
    ModelRunner runner(model,
                       {o.batch * o.input_len, o.batch, num_blocks, o.block_size, o.batch, o.enforce_eager, kv_dtype});
    Backend& backend = model.backend();
    std::vector<double> gaps;
    Backend::StepTraffic decode_traffic;
    BlockManager blocks(num_blocks, o.block_size, /*enable_prefix_caching=*/false);
    PlanBuilder planner(o.block_size);

    std::mt19937_64 rng(o.seed);
    std::uniform_int_distribution<int32_t> token(0, c.vocab_size - 1);
    SamplingParams greedy;
    greedy.temperature = 0;

    LatencyResult r;
    using clock = std::chrono::steady_clock;
    for (int32_t run = 0; run < o.warmup + o.repetitions; ++run) {
        std::vector<SequenceState> seqs(o.batch);
        std::vector<BlockCopy> no_copies;
        for (SequenceState& seq : seqs) {
            for (int32_t i = 0; i < o.input_len; ++i) seq.tokens.push_back(token(rng));
            seq.num_prompt_tokens = o.input_len;
            if (!blocks.allocate(seq.blocks, 0, total_len, no_copies))
                throw std::logic_error("bench latency: the KV pool was sized for every sequence");
        }
        // One plan for `count` rows of every sequence starting at `start`, each sampling after its last row.
        auto plan_rows = [&](int32_t start, int32_t count) {
            for (SequenceState& seq : seqs) {
                seq.num_computed = start;
                planner.add_logits_row(planner.add_rows(seq, count) + count - 1);
            }
            return planner.finish();
        };
        SamplingRow greedy_row;
        greedy_row.params = &greedy;
        std::vector<SamplingRow> rows(o.batch, greedy_row);
        auto sample_next = [&](int32_t pos) {
            for (auto& row : rows) row.position = pos;
            const auto ids = runner.sample(rows);
            for (int32_t s = 0; s < o.batch; ++s) seqs[s].tokens.push_back(ids[s]);
        };

        const bool last_run = run + 1 == o.warmup + o.repetitions;
        const auto t0 = clock::now();
        if (o.profile_prefill && last_run) backend.profiler_range(true);
        runner.forward(plan_rows(0, o.input_len));
        sample_next(o.input_len);
        if (o.profile_prefill && last_run) backend.profiler_range(false);
        backend.reset_traffic();
        const auto t1 = clock::now();
        const bool profiled = o.profile_steps > 0 && last_run;
        if (profiled) backend.profiler_range(true);
        for (int32_t step = 0; step + 1 < o.output_len; ++step) {
            runner.forward(plan_rows(o.input_len + step, 1));
            sample_next(o.input_len + step + 1);
            if (profiled && step + 1 == o.profile_steps) backend.profiler_range(false);
        }
        backend.synchronize();
        const auto t2 = clock::now();
        for (SequenceState& seq : seqs) blocks.free(seq.blocks);
        if (run >= o.warmup) {
            r.prefill_runs.push_back(std::chrono::duration<double>(t1 - t0).count());
            r.decode_runs.push_back(std::chrono::duration<double>(t2 - t1).count());
            const Backend::StepTraffic t = backend.traffic();
            decode_traffic.steps += t.steps;
            decode_traffic.host_to_device_bytes += t.host_to_device_bytes;
            decode_traffic.device_to_host_bytes += t.device_to_host_bytes;
            gaps.insert(gaps.end(), t.idle_gaps_us.begin(), t.idle_gaps_us.end());
        }
    }
    if (decode_traffic.steps > 0) {
        r.decode_d2h_bytes_per_step = double(decode_traffic.device_to_host_bytes) / decode_traffic.steps;
        r.decode_h2d_bytes_per_step = double(decode_traffic.host_to_device_bytes) / decode_traffic.steps;
    }
    if (!gaps.empty()) r.decode_idle_gap_us = median(gaps);
    r.recordings = backend.traffic().recordings;
    r.prefill_seconds = median(r.prefill_runs);
    r.decode_seconds = median(r.decode_runs);
    r.prefill_tok_s = double(o.batch) * o.input_len / r.prefill_seconds;
    r.prefill_flops = prefill_flops(c, o.batch, o.input_len);
    r.prefill_tflop_s = r.prefill_flops / r.prefill_seconds / 1e12;
    const int32_t steps = std::max(o.output_len - 1, 0);  // the first token comes from the prefill
    if (steps > 0) {
        r.decode_step_ms = r.decode_seconds / steps * 1e3;
        r.decode_tok_s = double(o.batch) * steps / r.decode_seconds;
        const double mid_context = o.input_len + o.output_len / 2.0;
        const double kv_bytes =
            2.0 * c.n_layers * c.n_kv_heads * c.head_dim * double(kv_dtype_bytes(kv_dtype)) * mid_context * o.batch;
        r.decode_bytes_per_step = weight_bytes_per_step(model, o.batch) + kv_bytes;
        r.kv_dtype = kv_dtype;
        r.decode_gb_s = r.decode_bytes_per_step / (r.decode_step_ms / 1e3) / 1e9;
    }
    return r;
}

}  // namespace minfer
