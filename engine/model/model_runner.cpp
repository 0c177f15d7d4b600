#include "engine/model/model_runner.h"

#include <fmt/format.h>

#include <cstdio>

#include "kernels/plan_codec.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace minfer {

int32_t decode_rows_bucket(int32_t n, int32_t max_seqs) {
    if (n <= 0 || n > max_seqs) return 0;
    const int32_t bucket = n <= 8 ? int32_t(std::bit_ceil(uint32_t(n))) : (n + 7) / 8 * 8;
    return std::min(bucket, max_seqs);
}

DecodeBucket decode_bucket(const StepPlan& plan, const RunnerLimits& limits) {
    const int32_t n = plan.num_tokens(), seqs = plan.num_seqs();
    if (seqs == 0 || n % seqs != 0 || plan.logits_rows.size() != size_t(n)) return {};
    // Every sequence has r rows and every row wants its logits (a draft
    // model's catch-up rows want none, and run as they are).
    const int32_t r = n / seqs;
    if (r > kMaxRecordedRowsPerSeq) return {};
    for (int32_t i = 0; i < n; ++i)
        if (plan.logits_rows[i] != i) return {};
    for (int32_t s = 0; s <= seqs; ++s)
        if (plan.query_start[s] != s * r) return {};
    const int32_t max_rows = std::min({limits.max_num_batched_tokens, limits.max_logits_rows, kMaxRecordedRows});
    DecodeBucket b;
    b.rows_per_seq = r;
    if (!(b.seqs = decode_rows_bucket(seqs, std::min(limits.max_num_seqs, max_rows / r)))) return {};
    const int32_t context = int32_t(std::bit_ceil(uint32_t(std::max(plan.max_context_len(), 256))));
    b.blocks_per_seq = std::max((context + limits.block_size - 1) / limits.block_size, plan.max_blocks_per_seq);
    return b;
}

StepPlan pad_decode_plan(const StepPlan& plan, const DecodeBucket& bucket) {
    const int32_t n = plan.num_tokens(), seqs = plan.num_seqs(), r = bucket.rows_per_seq;
    const int32_t rows = bucket.rows(), width = bucket.blocks_per_seq;
    if (n != seqs * r || bucket.seqs < seqs || width < plan.max_blocks_per_seq)
        throw std::invalid_argument(
            "pad_decode_plan: the plan's sequences do not have the bucket's rows, or exceed it");
    StepPlan out;
    out.token_ids = plan.token_ids;
    out.positions = plan.positions;
    out.slot_mapping = plan.slot_mapping;
    out.context_lens = plan.context_lens;
    out.token_ids.resize(rows, 0);
    out.slot_mapping.resize(rows, -1);
    out.context_lens.resize(bucket.seqs, r);
    for (int32_t i = n; i < rows; ++i) out.positions.push_back(i % r);
    out.query_start.resize(size_t(bucket.seqs) + 1);
    for (int32_t s = 0; s <= bucket.seqs; ++s) out.query_start[s] = s * r;
    out.logits_rows.resize(rows);
    std::iota(out.logits_rows.begin(), out.logits_rows.end(), 0);
    out.max_blocks_per_seq = width;
    out.block_tables.assign(size_t(bucket.seqs) * width, 0);  // padding sequences read block 0, harmlessly
    for (int32_t s = 0; s < seqs; ++s) {
        auto row = out.block_tables.begin() + int64_t(s) * width;
        std::fill(row, row + width, -1);
        std::copy_n(plan.block_tables.begin() + int64_t(s) * plan.max_blocks_per_seq, plan.max_blocks_per_seq, row);
    }
    return out;
}

size_t runner_workspace_bytes(const ModelConfig& c, const RunnerLimits& limits) {
    const int64_t n = limits.max_num_batched_tokens;
    const int64_t q_dim = int64_t(c.n_heads) * c.head_dim, kv_dim = int64_t(c.n_kv_heads) * c.head_dim;
    const int64_t logits_rows = limits.max_logits_rows > 0 ? limits.max_logits_rows : limits.max_num_seqs;
    const int64_t ffn = std::max(c.dense_ffn_dim(), 1);
    int64_t floats = n * (3 * int64_t(c.dim) + 2 * q_dim + 2 * kv_dim + 3 * ffn) +
                     logits_rows * (int64_t(c.dim) + c.vocab_size);
    if (c.is_moe())  // router logits, ids and weights, the shared gate and output
        floats += n * (int64_t(c.moe.n_experts) + 2 * c.moe.n_experts_used + 1 + c.dim);
    return size_t(floats) * sizeof(float);
}

KVDType resolve_kv_dtype(const Backend& backend, std::optional<KVDType> requested) {
    const KVDType t = requested.value_or(backend.default_kv_dtype());
    if (!backend.supports_kv_dtype(t))
        throw std::invalid_argument(std::string("--kv-cache-dtype ") + kv_dtype_name(t) + ": the " + backend.name() +
                                    " backend does not support it yet");
    return t;
}

namespace {

std::atomic<uint64_t> next_runner{0};

// What rank 0's runners send the other ranks (serve_workers).
enum WorkerCommand : int32_t {
    kStartRunner = 1,  // payload: the RunnerLimits
    kForward = 2,      // payload: the step plan (kernels/plan_codec.h)
    kEndRunner = 3,
    kRelease = 4,      // no more runners: serve_workers returns
};

std::vector<int32_t> encode_limits(const RunnerLimits& l) {
    return {l.max_num_batched_tokens, l.max_num_seqs, l.num_kv_blocks,         l.block_size,
            l.max_logits_rows,        l.enforce_eager, int32_t(l.kv_dtype)};
}

RunnerLimits decode_limits(const std::vector<int32_t>& v) {
    if (v.size() != 7) throw std::invalid_argument("serve_workers: a runner's limits are 7 numbers");
    return {v[0], v[1], v[2], v[3], v[4], v[5] != 0, KVDType(v[6])};
}

}  // namespace

void ModelRunner::serve_workers(const Model& model) {
    const Group* group = model.group();
    if (!group || group->is_root()) throw std::logic_error("serve_workers: only ranks other than 0 of a group serve");
    std::unique_ptr<ModelRunner> runner;
    std::vector<int32_t> payload;
    for (;;) {
        switch (group->control.receive(payload)) {
            case kStartRunner: runner = std::make_unique<ModelRunner>(model, decode_limits(payload)); break;
            case kForward:
                if (!runner) throw std::logic_error("serve_workers: a step before its runner");
                runner->forward(decode_plan(payload));
                break;
            case kEndRunner: runner.reset(); break;
            case kRelease: return;
            default: throw std::runtime_error("serve_workers: an unknown command from rank 0");
        }
    }
}

void ModelRunner::release_workers(const Group& group) {
    if (group.is_root()) group.control.send(kRelease, {});
}

ModelRunner::ModelRunner(const Model& model, RunnerLimits limits)
    : model_(model),
      backend_(model.backend()),
      group_(model.group()),
      limits_(limits),
      recording_tag_((next_runner++ & 0xffff) << 48),
      program_(LayerProgram::from(model.config())) {
    const ModelConfig& c = model.rank_config();
    if (limits_.max_num_batched_tokens <= 0 || limits_.max_num_seqs <= 0 || limits_.num_kv_blocks <= 0 ||
        limits_.block_size <= 0)
        throw std::invalid_argument("runner limits must be positive");
    if (limits_.max_logits_rows <= 0) limits_.max_logits_rows = limits_.max_num_seqs;
    auto buffer = [&](int64_t rows, int64_t width) {
        void* p = backend_.alloc(size_t(rows * width) * sizeof(float));
        allocations_.push_back(p);
        return static_cast<float*>(p);
    };
    const int64_t n = limits_.max_num_batched_tokens;
    const int64_t q_dim = int64_t(c.n_heads) * c.head_dim, kv_dim = int64_t(c.n_kv_heads) * c.head_dim;
    residual_ = buffer(n, c.dim);
    normed_ = buffer(n, c.dim);
    q_ = buffer(n, q_dim);
    k_ = buffer(n, kv_dim);
    v_ = buffer(n, kv_dim);
    attn_ = buffer(n, q_dim);
    proj_ = buffer(n, c.dim);
    const int64_t ffn = std::max(c.dense_ffn_dim(), 1);
    gate_ = buffer(n, ffn);
    up_ = buffer(n, ffn);
    hidden_ = buffer(n, ffn);
    if (c.is_moe()) {
        moe_.router_logits = buffer(n, c.moe.n_experts);
        moe_.expert_ids = reinterpret_cast<int32_t*>(buffer(n, c.moe.n_experts_used));
        moe_.expert_weights = buffer(n, c.moe.n_experts_used);
        moe_.shared_gate = buffer(n, 1);
        moe_.shared_out = buffer(n, c.dim);
    }
    last_rows_ = buffer(limits_.max_logits_rows, c.dim);
    logits_ = buffer(limits_.max_logits_rows, c.vocab_size);
    if (group_) {
        vocab_shard_ = (c.vocab_size + group_->size() - 1) / group_->size();
        shard_logits_ = buffer(limits_.max_logits_rows, vocab_shard_);
        gathered_logits_ = buffer(int64_t(group_->size()) * limits_.max_logits_rows, vocab_shard_);
        parallel_.ranks = group_->size();
        if (c.is_moe() && group_->is_root()) {
            expert_load_.emplace();
            expert_load_->experts_per_rank = c.moe.n_experts / group_->size();
            parallel_.expert_pairs.assign(size_t(group_->size()), 0);
        }
    }

    cache_.shape = {c.n_layers, limits_.num_kv_blocks, limits_.block_size, c.n_kv_heads, c.head_dim, limits_.kv_dtype};
    resolve_kv_dtype(backend_, limits_.kv_dtype);  // refuses a type the backend cannot run
    for (int32_t l = 0; l < c.n_layers; ++l) {
        cache_.k.push_back(backend_.alloc(cache_.shape.bytes_per_layer()));
        cache_.v.push_back(backend_.alloc(cache_.shape.bytes_per_layer()));
        allocations_.push_back(cache_.k.back());
        allocations_.push_back(cache_.v.back());
    }
    if (sends_to_workers()) group_->control.send(kStartRunner, encode_limits(limits_));
}

ModelRunner::~ModelRunner() {
    if (sends_to_workers()) group_->control.send(kEndRunner, {});
    for (void* p : allocations_) backend_.free(p);
}

void ModelRunner::forward(const StepPlan& plan) {
    const int32_t n = plan.num_tokens();
    if (n == 0 || n > limits_.max_num_batched_tokens)
        throw std::invalid_argument(fmt::format("step has {} rows; the runner takes 1 to {}", n,
                                                limits_.max_num_batched_tokens));
    if (plan.logits_rows.size() > size_t(limits_.max_logits_rows))
        throw std::invalid_argument(fmt::format("step wants {} logits rows; the runner holds {}",
                                                plan.logits_rows.size(), limits_.max_logits_rows));
    if (plan.num_seqs() > limits_.max_num_seqs)
        throw std::invalid_argument(fmt::format("step has {} sequences; the runner takes {}", plan.num_seqs(),
                                                limits_.max_num_seqs));
    plan.validate(limits_.num_kv_blocks, limits_.block_size);
    for (const int32_t id : plan.token_ids)
        if (id < 0 || id >= model_.config().vocab_size)
            throw std::out_of_range(fmt::format("token id {} outside the vocabulary of {}", id, model_.config().vocab_size));
    if (sends_to_workers()) {
        group_->control.send(kForward, encode_plan(plan));
        // The other ranks are in this step's collectives now: a step that
        // fails here halfway would leave them waiting, so it ends the job.
        try {
            forward_step(plan);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "minfer: rank 0: a step failed: %s (ending every rank)\n", e.what());
            group_->control.abort(1);
        }
        return;
    }
    forward_step(plan);
}

void ModelRunner::forward_step(const StepPlan& plan) {
    const int32_t n = plan.num_tokens();
    if (!plan.block_copies.empty()) backend_.copy_kv_blocks(cache_, plan.block_copies);
    num_logit_rows_ = static_cast<int32_t>(plan.logits_rows.size());

    const DecodeBucket bucket = backend_.can_record() ? decode_bucket(plan, limits_) : DecodeBucket{};
    if (group_) ++parallel_.steps;
    if (bucket.seqs == 0) {
        backend_.set_step(plan, limits_.block_size);
        if (expert_load_) expert_load_->pairs.assign(size_t(group_->size()), 0);
        run_layers(n, num_logit_rows_, expert_load_ ? &*expert_load_ : nullptr);
        if (expert_load_) count_expert_load();
        return;
    }
    padded_ = pad_decode_plan(plan, bucket);  // kept: a backend may read the plan until the next step
    backend_.set_step(padded_, limits_.block_size);
    const auto ops = [&] { run_layers(bucket.rows(), bucket.rows()); };
    if (limits_.enforce_eager)
        ops();
    else
        backend_.run_recorded(bucket.key() ^ recording_tag_, ops);
}

void ModelRunner::run_layers(int32_t n, int32_t logits_rows, ExpertLoad* expert_load) {
    LayerBuffers buf = moe_;
    buf.residual = residual_;
    buf.normed = normed_;
    buf.q = q_;
    buf.k = k_;
    buf.v = v_;
    buf.attn = attn_;
    buf.proj = proj_;
    buf.gate = gate_;
    buf.up = up_;
    buf.hidden = hidden_;
    const LayerContext ctx{model_.rank_config(),      program_, backend_, buf, cache_, n,
                           group_ ? &group_->comm : nullptr, expert_load};
    run_layer_program(ctx, model_.weights(), logits_rows, last_rows_, group_ ? shard_logits_ : logits_);
    if (group_ && logits_rows > 0) gather_logits(logits_rows);
}

// Rank r's LM head wrote [rows x its vocabulary part] into shard_logits_; all
// ranks send vocab_shard_ floats a row (the narrower parts' tails unused), and
// each part is copied into its columns of logits_.
void ModelRunner::gather_logits(int32_t rows) {
    const int32_t ranks = group_->size(), vocab = model_.config().vocab_size;
    const size_t part = size_t(rows) * vocab_shard_;
    group_->comm.all_gather(shard_logits_, part, gathered_logits_);
    for (int32_t r = 0; r < ranks; ++r) {
        const int64_t begin = int64_t(vocab) * r / ranks, width = int64_t(vocab) * (r + 1) / ranks - begin;
        backend_.copy_2d(logits_ + begin, size_t(vocab) * sizeof(float), gathered_logits_ + part * r,
                         size_t(width) * sizeof(float), size_t(width) * sizeof(float), size_t(rows));
    }
}

void ModelRunner::count_expert_load() {
    const std::vector<int64_t>& step = expert_load_->pairs;
    int64_t total = 0, most = 0;
    for (size_t r = 0; r < step.size(); ++r) {
        parallel_.expert_pairs[r] += step[r];
        total += step[r];
        most = std::max(most, step[r]);
    }
    if (total == 0) return;
    const double imbalance = double(most) * double(step.size()) / double(total);
    ++parallel_.balance_steps;
    parallel_.imbalance_sum += imbalance;
    parallel_.imbalance_max = std::max(parallel_.imbalance_max, imbalance);
}

ParallelStats ModelRunner::parallel_stats() const {
    ParallelStats s = parallel_;
    if (group_) s.floats_all_reduced = int64_t(group_->comm.floats_reduced());
    return s;
}

std::vector<int32_t> ModelRunner::sample(std::span<const SamplingRow> rows) {
    if (rows.size() > size_t(num_logit_rows_))
        throw std::invalid_argument("sample: more SamplingRows than logits rows");
    std::vector<int32_t> ids(rows.size());
    backend_.sample(logits_, model_.config().vocab_size, rows, ids.data());
    return ids;
}

std::vector<float> ModelRunner::logits() const {
    std::vector<float> out(size_t(num_logit_rows_) * model_.config().vocab_size);
    backend_.download(out.data(), logits_, out.size() * sizeof(float));
    return out;
}

void ModelRunner::read_kv_blocks(std::span<const int32_t> blocks, int32_t layer, void* k_out, void* v_out) const {
    backend_.kv_blocks_to_host(cache_, blocks, layer, k_out, v_out);
}

void ModelRunner::write_kv_blocks(std::span<const int32_t> blocks, int32_t layer, const void* k_in, const void* v_in) {
    backend_.kv_blocks_from_host(cache_, blocks, layer, k_in, v_in);
}

}  // namespace minfer
