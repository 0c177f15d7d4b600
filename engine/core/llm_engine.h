// LLMEngine: many requests over one model, one step at a time.
//
//   validate()     checks a request without touching the engine (any thread)
//   add_request()  validates a request and queues it
//   step()         propose drafts (speculative decoding) -> Scheduler::schedule -> PlanBuilder::build -> ModelRunner::forward
//                  -> PlanBuilder::fill_masks (beside the GPU's forward) -> ModelRunner::sample
//                  -> OutputProcessor::process -> outputs of the requests that moved
//   abort()        ends a request; its blocks go back to the pool
//
// The engine is single-threaded: EngineThread (engine_thread.h) runs it on its
// own thread for callers on other threads.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/draft_proposer.h"
#include "engine/core/output_processor.h"
#include "engine/core/parked_kv.h"
#include "engine/core/plan_builder.h"
#include "engine/core/sequence.h"
#include "engine/core/step_pacer.h"
#include "engine/model/model.h"
#include "engine/model/model_runner.h"
#include "engine/spec/spec_config.h"
#include "engine/spec/spec_stats.h"
#include "engine/text/tokenizer.h"
#include "kvcache/block_manager.h"
#include "scheduler/scheduler.h"

namespace minfer {

struct EngineConfig {
    int32_t max_num_seqs = 256;
    int32_t max_num_batched_tokens = 2048;
    int32_t max_model_len = 0;          // 0: the model's context length
    int32_t block_size = 16;
    int32_t num_kv_blocks = 0;          // > 0: exactly this many blocks
    size_t kv_cache_memory = 0;         // > 0: bytes for the KV pool
    std::optional<KVDType> kv_cache_dtype;  // the pool's elements; unset: the backend's default
                                            // (LLMEngine sets it to what it chose)
    double kv_cache_fraction = 0.25;    // otherwise, on the CPU: this fraction of free RAM
    double gpu_memory_utilization = 0.9;  // and on a GPU: this fraction of all its memory, for
                                          // everything (weights, activations, KV), as in vLLM
    bool enforce_eager = false;         // no CUDA graphs
    bool enable_prefix_caching = true;
    SchedulingPolicy policy = SchedulingPolicy::Fcfs;
    int32_t max_logprobs = 20;
    // A step's target time: its token budget shrinks below max_num_batched_tokens
    // to fit (StepPacer); 0: no target. Unset: 0.1 s on the CPU backend, none on
    // a GPU (LLMEngine sets it to what it chose).
    std::optional<double> max_step_seconds;
    SpeculativeConfig speculative;      // off by default
    // Disaggregation: KV blocks parked for a transfer (parked_kv.h) are freed
    // after this many seconds unless sent or claimed.
    double kv_transfer_timeout = 60;
};

// A request the engine refuses (bad parameters, too long for the context or
// the pool): the server answers 400 with the message.
struct RequestError : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
};

struct EngineStats {
    int64_t steps = 0;
    size_t num_running = 0;
    size_t num_waiting = 0;
    double kv_cache_usage = 0;  // fraction of blocks held by sequences
    int32_t num_kv_blocks = 0;
    int64_t prefix_cache_queries = 0;
    int64_t prefix_cache_hits = 0;
    int64_t num_preemptions = 0;
    int64_t prompt_tokens = 0;      // prompt tokens of finished and running requests, counted at admission
    int64_t generation_tokens = 0;  // tokens sampled
    // Prompt tokens this instance ran through the model (a prompt served from
    // the prefix cache or from received KV blocks computes only its rest).
    int64_t prefill_computed_tokens = 0;
    int64_t kv_parked_blocks = 0;       // blocks held for KV transfers (parked_kv.h)
    int64_t kv_parked_expired = 0;      // transfers whose blocks expired unsent or unclaimed
    int64_t kv_staged_bytes = 0;        // K/V copied out for the KV sender, not yet taken
    int64_t kv_received_unused = 0;     // requests whose received KV was missing or not usable
    double device_idle_seconds = 0;  // the device idle between consecutive steps, summed (GPU backends)
    SpecDecodeStats spec_decode;     // speculative decoding's drafts and acceptances
    ParallelStats parallel;          // a model split over ranks: all-reduce volume, experts' balance
};

class LLMEngine {
public:
    // draft_model: the proposer's model for speculative method Draft (the
    // caller loads it and checks its vocabulary: check_draft_vocabulary).
    LLMEngine(const Model& model, const Tokenizer& tokenizer, const EngineConfig& config,
              const Model* draft_model = nullptr);
    ~LLMEngine();

    const EngineConfig& config() const { return config_; }  // with the sizes actually chosen
    int32_t max_model_len() const { return config_.max_model_len; }
    const Tokenizer& tokenizer() const { return tokenizer_; }

    // Checks a request (and fills in its defaults: max_tokens) without touching
    // the engine's state, so another thread may call it while the engine runs:
    // throws RequestError if it is invalid or can never fit.
    void validate(const std::vector<int32_t>& prompt, GenerationOptions& options) const;
    // Queues a request under the caller's id (which no unfinished request may
    // have); throws RequestError if it is invalid or can never fit.
    void add_request(uint64_t request_id, std::vector<int32_t> prompt, GenerationOptions options);
    // The same under the next free id, which it returns.
    uint64_t add_request(std::vector<int32_t> prompt, GenerationOptions options);
    // The same for a text prompt, encoded with BOS as the model's file says.
    uint64_t add_request(std::string_view prompt, GenerationOptions options) {
        return add_request(tokenizer_.encode(prompt, /*add_special=*/true), std::move(options));
    }
    // Ends a request (unknown or finished ids are ignored); the next step reports it.
    void abort(uint64_t request_id);
    // Runs one step; returns the outputs of the requests that moved.
    std::vector<RequestOutput> step();
    bool has_unfinished() const { return !requests_.empty(); }
    // Called before waiting for requests with none left: the device's idle
    // time until the next step is not counted as the engine's.
    void wait_for_work() { model_.backend().wait_for_work(); }
    EngineStats stats() const;
    // The fair policy's virtual token counters, per client.
    const std::map<std::string, double>& client_counters() const { return scheduler_->client_counters(); }

    // ---- Disaggregation (parked_kv.h): on the engine's thread, between steps.
    // A prefill instance: each request with a kv_send_id leaves its prompt's
    // K/V here (host memory) when it ends; the KV sender takes them (any thread).
    std::shared_ptr<StagedKVStore> staged_kv() const { return staged_; }
    // A decode instance: room for a prompt whose K/V will arrive under `id`.
    // `hashes` is the sender's chain, which must match this instance's. Borrows
    // the leading blocks already cached here and allocates the rest; returns
    // the blocks (all of them) and how many are already here (their K/V need
    // not come). Throws RequestError if the chains differ or the pool has no room.
    struct IncomingKV {
        std::vector<int32_t> blocks;
        int32_t have = 0;
    };
    IncomingKV begin_incoming_kv(const std::string& id, std::vector<int32_t> tokens, std::span<const uint64_t> hashes);
    // The K/V have arrived: full blocks join the prefix cache, and the entry
    // waits for the request that names it in kv_receive_id.
    void finish_incoming_kv(const std::string& id);
    // Frees a parked entry (its transfer failed); unknown ids are ignored.
    void release_parked_kv(const std::string& id);
    bool has_parked_kv() const { return parked_->size() > 0 || staged_->size() > 0; }
    // Frees parked entries and staged prompts whose time is up (every step does it too).
    void expire_parked_kv();
    const KVCacheShape& kv_shape() const { return runner_->kv_shape(); }
    void write_kv_blocks(std::span<const int32_t> blocks, int32_t layer, const void* k, const void* v) {
        runner_->write_kv_blocks(blocks, layer, k, v);
    }

    // Every step's plan as one JSON line (for the book's scheduling figure).
    void set_trace(std::ostream* trace) { trace_ = trace; }
    // Called in step() once the step is scheduled, before the model runs: the
    // stats() of the step in progress (an engine thread publishes them, so a
    // long step does not hide its sequences from the metrics).
    void set_on_scheduled(std::function<void()> on_scheduled) { on_scheduled_ = std::move(on_scheduled); }

private:
    std::shared_ptr<const grammar::TokenVocabulary> grammar_vocabulary();
    void propose_drafts();
    void start_step(const SchedulerOutput& s);
    void commit_computed(const SchedulerOutput& s);
    void write_trace(const SchedulerOutput& s, const StepPlan& plan);
    void attach_received_kv(Sequence& seq, const std::string& id);
    void stage_outgoing_kv();

    const Model& model_;
    const Tokenizer& tokenizer_;
    std::shared_ptr<const grammar::TokenVocabulary> vocabulary_;  // grammar_vocabulary()
    EngineConfig config_;
    std::unique_ptr<BlockManager> blocks_;
    std::unique_ptr<ParkedKVTable> parked_;
    std::shared_ptr<StagedKVStore> staged_ = std::make_shared<StagedKVStore>();
    std::unique_ptr<Scheduler> scheduler_;
    std::unique_ptr<ModelRunner> runner_;
    std::unique_ptr<PlanBuilder> planner_;
    std::unique_ptr<StepPacer> pacer_;
    std::unique_ptr<OutputProcessor> outputs_;
    std::unique_ptr<DraftProposer> drafter_;      // speculative method Draft
    std::vector<BlockCopy> draft_copies_;         // copy-on-write the drafter made, for the target's next step

    RequestMap requests_;
    uint64_t next_request_id_ = 1;
    int64_t next_sequence_id_ = 1;
    int64_t arrivals_ = 0;
    int64_t steps_ = 0;
    int64_t prompt_tokens_ = 0;
    int64_t prefill_computed_ = 0;
    int64_t kv_received_unused_ = 0;
    std::ostream* trace_ = nullptr;
    std::function<void()> on_scheduled_;
};

// Picks the number of KV blocks for `config` on this model and backend (a
// block holds the draft model's K/V too when there is one).
int32_t kv_blocks_for(const ModelConfig& model, const Backend& backend, const EngineConfig& config,
                      const ModelConfig* draft = nullptr);

// Tensor parallelism: every rank of the model's group sizes the KV pool from
// its own memory as LLMEngine would for `config`, and all agree on the
// smallest (rank 0 then makes its engine with exactly that many blocks).
// Collective: each rank calls it once, before rank 0 makes its engine. When
// a rank has no room, the lowest such rank throws its std::invalid_argument
// and the others OtherRankFailed (kernels/parallel.h).
int32_t agree_kv_blocks(const Model& model, EngineConfig config, const Model* draft_model = nullptr);

// Throws std::invalid_argument unless the draft tokenizer has the target's
// vocabulary, token for token (what speculation with a draft model needs).
void check_draft_vocabulary(const Tokenizer& target, const Tokenizer& draft);

}  // namespace minfer
