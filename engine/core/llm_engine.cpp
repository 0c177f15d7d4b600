#include "engine/core/llm_engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <random>

#include <boost/json.hpp>

#include "engine/core/generate.h"
#include "engine/spec/ngram_proposer.h"

namespace minfer {

namespace {

double now_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int32_t blocks_for_tokens(int64_t tokens, int32_t block_size) {
    return static_cast<int32_t>((tokens + block_size - 1) / block_size);
}

}  // namespace

// The CPU's step target: 100 ms keeps the streams' inter-token latency near it
// while a long prompt is prefilled beside them (StepPacer), at some cost to the
// long prompt's own speed (smaller matrix products).
constexpr double kCpuStepSeconds = 0.1;

// Memory a GPU backend keeps beyond the runner's activations: cuBLASLt's
// workspace and converted activations, attention and sampling scratch, graphs.
constexpr size_t kDeviceReserve = size_t(1) << 30;

// The KV pool's budget on a GPU, as vLLM sizes it: a fraction of the whole
// device, less what is in use now (the weights, other processes) and what the
// runner will allocate.
size_t device_kv_budget(const ModelConfig& m, const Backend& backend, const EngineConfig& c,
                        const ModelConfig* draft) {
    const double total = double(backend.total_memory()), in_use = total - double(backend.available_memory());
    const RunnerLimits limits{c.max_num_batched_tokens, c.max_num_seqs, 1, c.block_size, c.max_num_seqs};
    double runner = double(runner_workspace_bytes(m, limits) + kDeviceReserve);
    if (draft) runner += double(runner_workspace_bytes(*draft, limits));
    const double budget = c.gpu_memory_utilization * total - in_use - runner;
    if (budget <= 0)
        throw std::invalid_argument(fmt::format(
            "--gpu-memory-utilization {} allows {:.2f} GiB of the device's {:.2f} GiB, but {:.2f} GiB are in use and "
            "the activations need {:.2f} GiB: nothing is left for the KV cache; raise it or lower "
            "--max-num-batched-tokens / --max-num-seqs",
            c.gpu_memory_utilization, c.gpu_memory_utilization * total / 1073741824.0, total / 1073741824.0,
            in_use / 1073741824.0, runner / 1073741824.0));
    return size_t(budget);
}

int32_t kv_blocks_for(const ModelConfig& m, const Backend& backend, const EngineConfig& c, const ModelConfig* draft) {
    if (c.num_kv_blocks > 0) return c.num_kv_blocks;
    auto block_bytes = [&](const ModelConfig& x) {
        return size_t(x.n_layers) * 2 * c.block_size * x.n_kv_heads * x.head_dim *
               kv_dtype_bytes(c.kv_cache_dtype.value_or(KVDType::F32));
    };
    const size_t per_block = block_bytes(m) + (draft ? block_bytes(*draft) : 0);
    const size_t budget = c.kv_cache_memory > 0   ? c.kv_cache_memory
                          : backend.name() == "cpu" ? size_t(double(backend.available_memory()) * c.kv_cache_fraction)
                                                    : device_kv_budget(m, backend, c, draft);
    // More blocks than every sequence at full length could use only feed the prefix cache; cap there.
    const int64_t useful = int64_t(c.max_num_seqs) * blocks_for_tokens(c.max_model_len, c.block_size) + 1;
    const int64_t blocks = std::min<int64_t>(int64_t(budget / per_block), std::min<int64_t>(useful, 1 << 30));
    if (blocks < blocks_for_tokens(c.max_model_len, c.block_size))
        throw std::invalid_argument(fmt::format(
            "the KV cache ({} MiB, {} blocks of {} tokens) cannot hold one sequence of max_model_len {} tokens; "
            "give it more memory (--kv-cache-memory) or lower --max-model-len",
            budget >> 20, blocks, c.block_size, c.max_model_len));
    return static_cast<int32_t>(blocks);
}

int32_t agree_kv_blocks(const Model& model, EngineConfig config, const Model* draft_model) {
    const Group* group = model.group();
    if (!group) throw std::logic_error("agree_kv_blocks: the model has no tensor-parallel group");
    int32_t blocks = 0;
    std::exception_ptr error;
    try {
        const ModelConfig& m = model.rank_config();
        if (config.max_model_len <= 0) config.max_model_len = m.context_len;
        config.kv_cache_dtype = resolve_kv_dtype(model.backend(), config.kv_cache_dtype);
        // The node's ranks share its RAM: each takes its part of the fraction.
        if (model.backend().name() == "cpu") config.kv_cache_fraction /= group->control.world().local_size;
        blocks = kv_blocks_for(m, model.backend(), config, draft_model ? &draft_model->config() : nullptr);
    } catch (const std::invalid_argument&) {
        error = std::current_exception();
    }
    group->control.agree(error);
    return int32_t(group->control.min(blocks));
}

void check_draft_vocabulary(const Tokenizer& target, const Tokenizer& draft) {
    if (draft.vocab_size() != target.vocab_size())
        throw std::invalid_argument(fmt::format("the draft model's vocabulary has {} tokens, the model's {}: speculation "
                                                "needs the same vocabulary",
                                                draft.vocab_size(), target.vocab_size()));
    for (int32_t t = 0; t < target.vocab_size(); ++t)
        if (draft.token_to_piece(t) != target.token_to_piece(t) || draft.token_type(t) != target.token_type(t))
            throw std::invalid_argument(fmt::format(
                "the draft model's token {} is {:?}, the model's {:?}: speculation needs the same vocabulary", t,
                draft.token_to_piece(t), target.token_to_piece(t)));
}

LLMEngine::LLMEngine(const Model& model, const Tokenizer& tokenizer, const EngineConfig& config,
                     const Model* draft_model)
    : model_(model), tokenizer_(tokenizer), config_(config) {
    const ModelConfig& m = model.config();
    if (config_.max_num_seqs <= 0 || config_.max_num_batched_tokens <= 0 || config_.block_size <= 0)
        throw std::invalid_argument("max_num_seqs, max_num_batched_tokens and block_size must be > 0");
    if (config_.max_model_len <= 0 || config_.max_model_len > m.context_len) {
        if (config_.max_model_len > m.context_len)
            throw std::invalid_argument(fmt::format("--max-model-len {} exceeds the model's context of {} tokens",
                                                    config_.max_model_len, m.context_len));
        config_.max_model_len = m.context_len;
    }
    config_.kv_cache_dtype = resolve_kv_dtype(model.backend(), config_.kv_cache_dtype);
    if (!config_.max_step_seconds) config_.max_step_seconds = model.backend().name() == "cpu" ? kCpuStepSeconds : 0.0;
    pacer_ = std::make_unique<StepPacer>(*config_.max_step_seconds, config_.max_num_batched_tokens);
    config_.speculative.validate();
    const bool drafting = config_.speculative.enabled() && config_.speculative.method == SpeculativeMethod::Draft;
    if (drafting && !draft_model) throw std::invalid_argument("speculative method draft: no draft model was loaded");
    if (drafting && draft_model->config().vocab_size != m.vocab_size)
        throw std::invalid_argument(fmt::format("the draft model's output has {} logits, the model's {}",
                                                draft_model->config().vocab_size, m.vocab_size));
    if (drafting && &draft_model->backend() != &model.backend())
        throw std::invalid_argument("the draft model must be loaded on the model's backend");
    config_.num_kv_blocks =
        kv_blocks_for(model.rank_config(), model.backend(), config_, drafting ? &draft_model->config() : nullptr);
    blocks_ = std::make_unique<BlockManager>(config_.num_kv_blocks, config_.block_size, config_.enable_prefix_caching);
    parked_ = std::make_unique<ParkedKVTable>(*blocks_);
    // A row of logits per sequence, and per draft of the sequences that may speculate.
    int32_t logits_rows = config_.max_num_seqs;
    if (config_.speculative.enabled()) {
        const int32_t limit = config_.speculative.disable_by_batch_size;
        const int32_t speculating = limit > 0 ? std::min(limit, config_.max_num_seqs) : config_.max_num_seqs;
        logits_rows += speculating * config_.speculative.num_speculative_tokens;
    }
    scheduler_ = std::make_unique<Scheduler>(
        SchedulerConfig{config_.max_num_seqs, config_.max_num_batched_tokens, logits_rows, config_.policy}, *blocks_);
    runner_ = std::make_unique<ModelRunner>(model, RunnerLimits{config_.max_num_batched_tokens, config_.max_num_seqs,
                                                                config_.num_kv_blocks, config_.block_size,
                                                                logits_rows, config_.enforce_eager,
                                                                *config_.kv_cache_dtype});
    if (drafting)
        drafter_ = std::make_unique<DraftProposer>(
            *draft_model, RunnerLimits{config_.max_num_batched_tokens, config_.max_num_seqs, config_.num_kv_blocks,
                                       config_.block_size, config_.max_num_seqs, config_.enforce_eager,
                                       *config_.kv_cache_dtype});
    // End-of-generation ids, and BOS, which base models sample to restart.
    const std::vector<int32_t> eos_ids = default_stop_ids(tokenizer);
    planner_ = std::make_unique<PlanBuilder>(config_.block_size, eos_ids);
    outputs_ = std::make_unique<OutputProcessor>(tokenizer, *scheduler_, *blocks_, eos_ids,
                                                 OutputProcessor::Limits{m.vocab_size, config_.max_model_len},
                                                 next_sequence_id_, *parked_, config_.kv_transfer_timeout);
}

LLMEngine::~LLMEngine() = default;

void LLMEngine::validate(const std::vector<int32_t>& prompt, GenerationOptions& o) const {
    auto bad = [](const std::string& what) { throw RequestError(what); };
    const int32_t vocab = model_.config().vocab_size;
    const int32_t len = static_cast<int32_t>(prompt.size());
    if (prompt.empty()) bad("the prompt is empty");
    for (int32_t t : prompt)
        if (t < 0 || t >= vocab) bad(fmt::format("prompt token id {} is outside the vocabulary of {}", t, vocab));
    if (len >= config_.max_model_len)
        bad(fmt::format("This model's maximum context length is {} tokens. However, your prompt has {} tokens, "
                        "which leaves no room to generate.",
                        config_.max_model_len, len));
    if (o.max_tokens < 0) o.max_tokens = config_.max_model_len - len;
    if (o.max_tokens == 0) bad("max_tokens must be at least 1");
    if (int64_t(len) + o.max_tokens > config_.max_model_len)
        bad(fmt::format("This model's maximum context length is {} tokens. However, you requested {} tokens ({} in "
                        "the prompt, {} for the completion). Please reduce the prompt or max_tokens.",
                        config_.max_model_len, int64_t(len) + o.max_tokens, len, o.max_tokens));
    if (blocks_for_tokens(int64_t(len) + o.max_tokens, config_.block_size) > config_.num_kv_blocks)
        bad(fmt::format("the request needs {} KV blocks of {} tokens, more than the whole pool of {}",
                        blocks_for_tokens(int64_t(len) + o.max_tokens, config_.block_size), config_.block_size,
                        config_.num_kv_blocks));
    if (o.n < 1 || o.n > config_.max_num_seqs)
        bad(fmt::format("'n' must be in 1..{} (the engine's --max-num-seqs)", config_.max_num_seqs));
    if (o.min_tokens < 0 || o.min_tokens > o.max_tokens) bad("min_tokens must be in 0..max_tokens");
    if (o.logprobs > config_.max_logprobs) bad(fmt::format("logprobs must be at most {}", config_.max_logprobs));
    for (const std::string& s : o.stop)
        if (s.empty()) bad("stop strings must not be empty");
    for (int32_t t : o.stop_token_ids)
        if (t < 0 || t >= vocab) bad(fmt::format("stop token id {} is outside the vocabulary", t));
    try {
        o.sampling.validate(vocab);
    } catch (const std::invalid_argument& e) {
        bad(e.what());
    }
}

uint64_t LLMEngine::add_request(std::vector<int32_t> prompt, GenerationOptions options) {
    while (requests_.contains(next_request_id_)) ++next_request_id_;
    const uint64_t id = next_request_id_++;
    add_request(id, std::move(prompt), std::move(options));
    return id;
}

void LLMEngine::add_request(uint64_t request_id, std::vector<int32_t> prompt, GenerationOptions options) {
    if (requests_.contains(request_id)) throw RequestError(fmt::format("request id {} is in use", request_id));
    validate(prompt, options);
    if (!options.has_seed) {
        static thread_local std::mt19937_64 rng{std::random_device{}()};
        options.sampling.seed = rng();
    }
    auto r = std::make_unique<Request>();
    r->id = request_id;
    r->prompt = std::move(prompt);
    r->options = std::move(options);
    if (r->options.grammar) r->vocabulary = grammar_vocabulary();
    r->arrival = arrivals_++;
    r->arrival_time = now_seconds();

    auto seq = make_sequence(*r, 0, next_sequence_id_++, tokenizer_);
    if (!r->options.kv_receive_id.empty()) attach_received_kv(*seq, r->options.kv_receive_id);
    scheduler_->add_waiting(seq.get());
    r->seqs.push_back(std::move(seq));
    prompt_tokens_ += static_cast<int64_t>(r->prompt.size());
    requests_.emplace(request_id, std::move(r));
}

// Built at the first request that has a grammar.
std::shared_ptr<const grammar::TokenVocabulary> LLMEngine::grammar_vocabulary() {
    if (!vocabulary_) vocabulary_ = token_vocabulary(tokenizer_);
    return vocabulary_;
}

void LLMEngine::abort(uint64_t request_id) {
    auto it = requests_.find(request_id);
    if (it == requests_.end()) return;
    Request& r = *it->second;
    r.aborted = true;
    for (auto& seq : r.seqs)
        if (!seq->finished()) outputs_->finish(*seq, "abort");
    outputs_->moved(r);
}

std::vector<RequestOutput> LLMEngine::step() {
    expire_parked_kv();
    if (config_.speculative.enabled()) propose_drafts();
    SchedulerOutput scheduled = scheduler_->schedule(pacer_->next());
    // The drafter's copy-on-write copies come first: the scheduler's own were decided after them.
    scheduled.copies.insert(scheduled.copies.begin(), draft_copies_.begin(), draft_copies_.end());
    draft_copies_.clear();
    if (!scheduled.empty()) {
        const double began = now_seconds();
        start_step(scheduled);
        StepInputs in = planner_->build(scheduled);
        if (trace_) write_trace(scheduled, in.plan);

        runner_->forward(in.plan);  // on a GPU this returns with the kernels still running...
        planner_->fill_masks(in);   // ...so the grammars' masks are computed beside them
        const std::vector<float> logits = in.needs_logits ? runner_->logits() : std::vector<float>{};
        const std::vector<int32_t> sampled =
            in.sampling_rows.empty() ? std::vector<int32_t>{} : runner_->sample(in.sampling_rows);

        commit_computed(scheduled);
        outputs_->process(in, sampled, logits);
        stage_outgoing_kv();
        pacer_->observe(scheduled.num_tokens, now_seconds() - began);
    }
    return outputs_->collect(requests_);
}

// Each running decode guesses its next tokens (the scheduler trims them to the
// step's budget). None while more sequences run than disable_by_batch_size:
// a large batch keeps the device busy without them.
void LLMEngine::propose_drafts() {
    const SpeculativeConfig& spec = config_.speculative;
    const bool on = spec.disable_by_batch_size == 0 || scheduler_->num_running() <= size_t(spec.disable_by_batch_size);
    std::vector<DraftRequest> wanted;
    std::deque<std::vector<int32_t>> held_back;  // the requests' spans point here (a deque does not move them)
    for (auto& [id, r] : requests_)
        for (auto& seq : r->seqs) {
            seq->draft_tokens.clear();
            seq->draft_probs.clear();
            if (!on || seq->status != SequenceStatus::Running || seq->num_uncomputed() != 1 ||
                seq->forks_on_first_sample())
                continue;
            // Every draft accepted, plus the target's own token, must fit max_tokens and the context.
            const int32_t room = std::min({spec.num_speculative_tokens, r->options.max_tokens - seq->num_output() - 1,
                                           config_.max_model_len - seq->num_tokens() - 1});
            if (room <= 0) continue;
            if (drafter_) {
                const GenerationOptions& o = r->options;
                DraftRequest d{seq.get(), &o.sampling, uint64_t(seq->sample_index), room, &seq->draft_probs};
                d.constraint = seq->constraint.get();
                d.end_ids = planner_->end_ids(o);
                d.min_tokens = o.min_tokens;
                if (seq->num_output() < o.min_tokens) d.held_back = held_back.emplace_back(planner_->held_back(o));
                wanted.push_back(d);
            } else
                seq->draft_tokens = ngram_propose(seq->tokens, spec.prompt_lookup_min, spec.prompt_lookup_max, room);
        }
    if (drafter_ && !wanted.empty()) drafter_->propose(wanted, *blocks_, draft_copies_);
}

// Every scheduled request will report at the end of the step (its queue time
// the first time a step takes it).
void LLMEngine::start_step(const SchedulerOutput& s) {
    ++steps_;
    const double now = now_seconds();
    for (const ScheduledSequence& sc : s.scheduled) {
        Request& r = *as_sequence(*sc.seq).request;
        if (r.first_scheduled_time < 0) r.first_scheduled_time = now;
        outputs_->moved(r);
    }
    if (on_scheduled_) on_scheduled_();
}

// The K/V of the scheduled rows are in the cache now: full blocks join the prefix cache.
void LLMEngine::commit_computed(const SchedulerOutput& s) {
    for (const ScheduledSequence& sc : s.scheduled) {
        SequenceState& seq = *sc.seq;
        const int32_t from = seq.num_computed;
        seq.num_computed += sc.num_tokens - int32_t(seq.draft_tokens.size());  // drafts: when accepted
        prefill_computed_ += std::max(0, std::min(seq.num_computed, seq.num_prompt_tokens) - from);
        blocks_->commit(seq.blocks, seq.tokens, seq.num_computed);
    }
}

EngineStats LLMEngine::stats() const {
    EngineStats st;
    st.steps = steps_;
    st.num_running = scheduler_->num_running();
    st.num_waiting = scheduler_->num_waiting();
    st.kv_cache_usage = blocks_->usage();
    st.num_kv_blocks = blocks_->num_blocks();
    st.prefix_cache_queries = blocks_->prefix_cache_stats().queries;
    st.prefix_cache_hits = blocks_->prefix_cache_stats().hits;
    st.num_preemptions = scheduler_->num_preemptions();
    st.prompt_tokens = prompt_tokens_;
    st.generation_tokens = outputs_->generation_tokens();
    st.prefill_computed_tokens = prefill_computed_;
    st.kv_parked_blocks = parked_->num_blocks();
    st.kv_parked_expired = parked_->num_expired() + staged_->num_expired();
    st.kv_staged_bytes = staged_->bytes();
    st.kv_received_unused = kv_received_unused_;
    st.device_idle_seconds = model_.backend().device_idle_seconds();
    st.spec_decode = outputs_->spec_stats();
    st.parallel = runner_->parallel_stats();
    return st;
}

void LLMEngine::write_trace(const SchedulerOutput& s, const StepPlan& plan) {
    boost::json::array seqs;
    for (const ScheduledSequence& sc : s.scheduled) {
        const Sequence& q = as_sequence(*sc.seq);
        seqs.push_back({{"seq", q.id},
                        {"request", q.request->id},
                        {"sample", q.sample_index},
                        {"computed", q.num_computed},
                        {"tokens", sc.num_tokens},
                        {"kind", q.num_computed >= q.num_tokens() - 1 ? "decode" : "prefill"},
                        {"blocks", boost::json::value_from(q.blocks.blocks)}});
    }
    boost::json::array preempted;
    for (const SequenceState* q : s.preempted) preempted.push_back(q->id);
    boost::json::array copies;
    for (const BlockCopy& c : s.copies) copies.push_back({c.src, c.dst});
    const boost::json::object line{{"step", steps_},
                                   {"num_tokens", plan.num_tokens()},
                                   {"seqs", seqs},
                                   {"preempted", preempted},
                                   {"block_copies", copies},
                                   {"blocks_free", blocks_->num_free_blocks()},
                                   {"blocks_total", blocks_->num_blocks()},
                                   {"waiting", scheduler_->num_waiting()},
                                   {"prefix_cache_hits", blocks_->prefix_cache_stats().hits}};
    *trace_ << boost::json::serialize(line) << '\n';
}

}  // namespace minfer
