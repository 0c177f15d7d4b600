#include "engine/core/llm_engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include <boost/json.hpp>

#include "engine/core/generate.h"

namespace minfer {

namespace {

double now_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int32_t blocks_for_tokens(int64_t tokens, int32_t block_size) {
    return static_cast<int32_t>((tokens + block_size - 1) / block_size);
}

}  // namespace

TokenLogprob logprob_of(const float* logits, int32_t vocab, int32_t token, int32_t k) {
    float max_logit = -INFINITY;
    for (int32_t i = 0; i < vocab; ++i) max_logit = std::max(max_logit, logits[i]);
    double sum = 0;
    for (int32_t i = 0; i < vocab; ++i) sum += std::exp(double(logits[i]) - max_logit);
    const double log_z = max_logit + std::log(sum);
    TokenLogprob lp{token, float(logits[token] - log_z), {}};
    if (k > 0) {
        std::vector<int32_t> ids(vocab);
        for (int32_t i = 0; i < vocab; ++i) ids[i] = i;
        k = std::min(k, vocab);
        std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
            return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
        });
        for (int32_t i = 0; i < k; ++i) lp.top.emplace_back(ids[i], float(logits[ids[i]] - log_z));
    }
    return lp;
}

// What one row of the step's logits is for.
struct LLMEngine::LogitsUse {
    Sequence* seq;
    int32_t sample_stream;    // >= 0: draw the next token of sample `sample_stream`
    int32_t prompt_position;  // >= 0: logprob of prompt token prompt_position + 1
};

// Memory a GPU backend keeps beyond the runner's activations: cuBLASLt's
// workspace and converted activations, attention and sampling scratch, graphs.
constexpr size_t kDeviceReserve = size_t(1) << 30;

// The KV pool's budget on a GPU, as vLLM sizes it: a fraction of the whole
// device, less what is in use now (the weights, other processes) and what the
// runner will allocate.
size_t device_kv_budget(const ModelConfig& m, const Backend& backend, const EngineConfig& c) {
    const double total = double(backend.total_memory()), in_use = total - double(backend.available_memory());
    const RunnerLimits limits{c.max_num_batched_tokens, c.max_num_seqs, 1, c.block_size, c.max_num_seqs};
    const double runner = double(runner_workspace_bytes(m, limits) + kDeviceReserve);
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

int32_t kv_blocks_for(const ModelConfig& m, const Backend& backend, const EngineConfig& c) {
    if (c.num_kv_blocks > 0) return c.num_kv_blocks;
    const size_t per_block = size_t(m.n_layers) * 2 * c.block_size * m.n_kv_heads * m.head_dim *
                             kv_dtype_bytes(c.kv_cache_dtype.value_or(KVDType::F32));
    const size_t budget = c.kv_cache_memory > 0   ? c.kv_cache_memory
                          : backend.name() == "cpu" ? size_t(double(backend.available_memory()) * c.kv_cache_fraction)
                                                    : device_kv_budget(m, backend, c);
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

LLMEngine::LLMEngine(const Model& model, const Tokenizer& tokenizer, const EngineConfig& config)
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
    config_.num_kv_blocks = kv_blocks_for(m, model.backend(), config_);
    blocks_ = std::make_unique<BlockManager>(config_.num_kv_blocks, config_.block_size, config_.enable_prefix_caching);
    const int32_t logits_rows = config_.max_num_seqs;
    scheduler_ = std::make_unique<Scheduler>(
        SchedulerConfig{config_.max_num_seqs, config_.max_num_batched_tokens, logits_rows, config_.policy}, *blocks_);
    runner_ = std::make_unique<ModelRunner>(model, RunnerLimits{config_.max_num_batched_tokens, config_.max_num_seqs,
                                                                config_.num_kv_blocks, config_.block_size,
                                                                logits_rows, config_.enforce_eager,
                                                                *config_.kv_cache_dtype});
    eos_ids_ = default_stop_ids(tokenizer);
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
    if (o.n < 1 || o.n > config_.max_num_seqs) bad(fmt::format("n must be in 1..{}", config_.max_num_seqs));
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
    validate(prompt, options);
    if (!options.has_seed) {
        static thread_local std::mt19937_64 rng{std::random_device{}()};
        options.sampling.seed = rng();
    }
    auto r = std::make_unique<Request>();
    r->id = next_request_id_++;
    r->prompt = std::move(prompt);
    r->options = std::move(options);
    r->arrival = arrivals_++;
    r->arrival_time = now_seconds();

    auto seq = std::make_unique<Sequence>();
    seq->id = next_sequence_id_++;
    seq->request = r.get();
    seq->arrival = r->arrival;
    seq->priority = r->options.priority;
    seq->client = r->options.client;
    seq->tokens = r->prompt;
    seq->num_prompt_tokens = static_cast<int32_t>(r->prompt.size());
    seq->detokenizer = std::make_unique<IncrementalDetokenizer>(tokenizer_, r->prompt);
    scheduler_->add_waiting(seq.get());
    r->seqs.push_back(std::move(seq));
    prompt_tokens_ += static_cast<int64_t>(r->prompt.size());
    const uint64_t id = r->id;
    requests_.emplace(id, std::move(r));
    return id;
}

void LLMEngine::abort(uint64_t request_id) {
    auto it = requests_.find(request_id);
    if (it == requests_.end()) return;
    Request& r = *it->second;
    r.aborted = true;
    for (auto& seq : r.seqs)
        if (!seq->finished()) finish(*seq, "abort");
    if (std::find(moved_.begin(), moved_.end(), &r) == moved_.end()) moved_.push_back(&r);
}

void LLMEngine::finish(Sequence& seq, const std::string& reason) {
    if (reason == "length") seq.text += seq.detokenizer->flush();
    seq.finish_reason = reason;
    scheduler_->remove(&seq);
    seq.status = SequenceStatus::Finished;
}

// A new token for `seq`: logprobs, text, and every stop condition.
void LLMEngine::append_token(Sequence& seq, int32_t token, const float* logits) {
    const GenerationOptions& o = seq.request->options;
    seq.tokens.push_back(token);
    ++generation_tokens_;
    if (o.logprobs >= 0) seq.logprobs.push_back(logprob_of(logits, model_.config().vocab_size, token, o.logprobs));

    const bool may_stop = seq.num_output() > o.min_tokens || o.min_tokens == 0;
    const bool is_eos = !o.ignore_eos && std::find(eos_ids_.begin(), eos_ids_.end(), token) != eos_ids_.end();
    const bool is_stop_id = std::find(o.stop_token_ids.begin(), o.stop_token_ids.end(), token) != o.stop_token_ids.end();
    if (may_stop && (is_eos || is_stop_id)) {
        if (is_stop_id) seq.stop_token = token;
        finish(seq, "stop");  // the stop token's own text is not part of the output
        return;
    }
    const size_t before = seq.text.size();
    seq.text += seq.detokenizer->push(token);
    if (may_stop && !o.stop.empty()) {
        const size_t longest = seq.request->longest_stop();
        // A stop string ends inside the new text: search from where it could start.
        const size_t from = before >= longest ? before - longest + 1 : 0;
        size_t cut = std::string::npos;
        for (const std::string& s : o.stop) {
            const size_t at = seq.text.find(s, from);
            if (at != std::string::npos && at < cut) {
                cut = at;
                seq.stop_string = s;
            }
        }
        if (cut != std::string::npos) {
            seq.text.resize(cut);
            finish(seq, "stop");
            return;
        }
    }
    if (seq.num_output() >= o.max_tokens || seq.num_tokens() >= config_.max_model_len) finish(seq, "length");
}

std::vector<RequestOutput> LLMEngine::step() {
    std::vector<RequestOutput> outputs;
    const SchedulerOutput s = scheduler_->schedule();
    if (!s.empty()) {
        ++steps_;
        const int32_t bs = config_.block_size;

        // The plan: every scheduled sequence's new rows back to back.
        StepPlan plan;
        std::vector<LogitsUse> uses;
        size_t max_blocks = 0;
        for (const ScheduledSequence& sc : s.scheduled) max_blocks = std::max(max_blocks, sc.seq->blocks.blocks.size());
        plan.max_blocks_per_seq = static_cast<int32_t>(max_blocks);
        plan.query_start.push_back(0);
        std::vector<std::pair<int32_t, LogitsUse>> prompt_rows;  // computed after the sample rows
        const double step_start = now_seconds();
        for (const ScheduledSequence& sc : s.scheduled) {
            Sequence& seq = as_sequence(*sc.seq);
            if (seq.request->first_scheduled_time < 0) seq.request->first_scheduled_time = step_start;
            const int32_t first = seq.num_computed, end = first + sc.num_tokens;
            for (int32_t p = first; p < end; ++p) {
                plan.token_ids.push_back(seq.tokens[p]);
                plan.positions.push_back(p);
                plan.slot_mapping.push_back(seq.blocks.blocks[p / bs] * bs + p % bs);
                if (seq.wants_prompt_logprob_row(p))
                    prompt_rows.push_back({plan.num_tokens() - 1, {&seq, -1, p}});
            }
            plan.query_start.push_back(plan.num_tokens());
            plan.context_lens.push_back(end);
            for (size_t b = 0; b < max_blocks; ++b)
                plan.block_tables.push_back(b < seq.blocks.blocks.size() ? seq.blocks.blocks[b] : -1);
            if (end == seq.num_tokens()) {
                const int32_t draws = seq.forks_on_first_sample() ? seq.request->options.n : 1;
                for (int32_t k = 0; k < draws; ++k) {
                    plan.logits_rows.push_back(plan.num_tokens() - 1);
                    uses.push_back({&seq, draws > 1 ? k : seq.sample_index, -1});
                }
            }
        }
        const size_t num_sample_rows = uses.size();
        for (const auto& [row, use] : prompt_rows) {
            plan.logits_rows.push_back(row);
            uses.push_back(use);
        }
        for (const BlockCopy& c : s.copies) {
            plan.block_copies.push_back(c.src);
            plan.block_copies.push_back(c.dst);
        }
        if (trace_) write_trace(s, plan);

        runner_->forward(plan);

        // Logprobs are of the model's raw distribution: read before sampling processes the logits.
        bool need_logits = !prompt_rows.empty();
        for (size_t i = 0; i < num_sample_rows; ++i) need_logits |= uses[i].seq->request->options.logprobs >= 0;
        const std::vector<float> logits = need_logits ? runner_->logits() : std::vector<float>{};
        const int32_t vocab = model_.config().vocab_size;

        std::vector<SamplingRow> rows;
        std::vector<std::vector<int32_t>> suppressed(num_sample_rows);
        for (size_t i = 0; i < num_sample_rows; ++i) {
            Sequence& seq = *uses[i].seq;
            const GenerationOptions& o = seq.request->options;
            if (seq.num_output() < o.min_tokens) {
                suppressed[i] = o.stop_token_ids;
                if (!o.ignore_eos) suppressed[i].insert(suppressed[i].end(), eos_ids_.begin(), eos_ids_.end());
            }
            const std::span<const int32_t> all(seq.tokens);
            rows.push_back({&o.sampling, uint64_t(uses[i].sample_stream), seq.num_tokens(),
                            all.first(seq.num_prompt_tokens), all.subspan(seq.num_prompt_tokens), suppressed[i], {}});
        }
        const std::vector<int32_t> sampled = rows.empty() ? std::vector<int32_t>{} : runner_->sample(rows);

        // The K/V of the scheduled rows are in the cache now.
        for (const ScheduledSequence& sc : s.scheduled) {
            sc.seq->num_computed += sc.num_tokens;
            blocks_->commit(sc.seq->blocks, sc.seq->tokens, sc.seq->num_computed);
        }
        for (size_t i = num_sample_rows; i < uses.size(); ++i) {
            Request& r = *uses[i].seq->request;
            const int32_t p = uses[i].prompt_position;
            r.prompt_logprobs.push_back(
                logprob_of(logits.data() + i * size_t(vocab), vocab, r.prompt[p + 1], r.options.logprobs));
        }
        for (size_t i = 0; i < num_sample_rows; ++i) {
            Sequence& seq = *uses[i].seq;
            Request& r = *seq.request;
            const float* row_logits = need_logits ? logits.data() + i * size_t(vocab) : nullptr;
            if (seq.forks_on_first_sample() && uses[i].sample_stream > 0) {
                // Sample k > 0 of a fresh prompt: a copy of sample 0 that shares its blocks.
                auto child = std::make_unique<Sequence>();
                child->id = next_sequence_id_++;
                child->request = &r;
                child->arrival = r.arrival;
                child->priority = r.options.priority;
                child->client = r.options.client;
                child->sample_index = uses[i].sample_stream;
                child->tokens = r.prompt;
                child->num_prompt_tokens = seq.num_prompt_tokens;
                child->num_computed = seq.num_computed;
                child->num_charged = seq.num_charged;
                child->blocks = blocks_->fork(seq.blocks);
                child->detokenizer = std::make_unique<IncrementalDetokenizer>(tokenizer_, r.prompt);
                scheduler_->add_running(child.get());
                r.seqs.push_back(std::move(child));
                append_token(*r.seqs.back(), sampled[i], row_logits);
            }
        }
        for (size_t i = 0; i < num_sample_rows; ++i) {
            Sequence& seq = *uses[i].seq;
            if (uses[i].sample_stream == seq.sample_index)
                append_token(seq, sampled[i], need_logits ? logits.data() + i * size_t(vocab) : nullptr);
        }
        for (const ScheduledSequence& sc : s.scheduled)
            if (std::find(moved_.begin(), moved_.end(), as_sequence(*sc.seq).request) == moved_.end())
                moved_.push_back(as_sequence(*sc.seq).request);
    }
    for (Request* r : moved_) collect(*r, outputs);
    moved_.clear();
    return outputs;
}

// The request's news since its last output; a finished request is dropped.
void LLMEngine::collect(Request& r, std::vector<RequestOutput>& outputs) {
    RequestOutput out;
    out.request_id = r.id;
    out.num_prompt_tokens = static_cast<int32_t>(r.prompt.size());
    out.prompt_logprobs.assign(r.prompt_logprobs.begin() + long(r.prompt_logprobs_sent), r.prompt_logprobs.end());
    r.prompt_logprobs_sent = r.prompt_logprobs.size();
    bool all_finished = int32_t(r.seqs.size()) == r.options.n || r.aborted;
    const size_t longest_stop = r.longest_stop();
    for (auto& seq_ptr : r.seqs) {
        Sequence& seq = *seq_ptr;
        all_finished &= seq.finished();
        // Hold back text that could be the start of a stop string.
        size_t ready = seq.text.size();
        if (!seq.finished() && longest_stop > 0)
            ready = std::max(seq.text_sent, ready >= longest_stop - 1 ? ready - (longest_stop - 1) : 0);
        const size_t generated = static_cast<size_t>(seq.num_output());
        const bool news = ready > seq.text_sent || generated > seq.tokens_sent || (seq.finished() && !seq.finish_sent);
        if (!news) continue;
        SampleOutput so;
        so.index = seq.sample_index;
        so.token_ids.assign(seq.tokens.begin() + seq.num_prompt_tokens + long(seq.tokens_sent), seq.tokens.end());
        so.text = seq.text.substr(seq.text_sent, ready - seq.text_sent);
        so.logprobs.assign(seq.logprobs.begin() + long(seq.logprobs_sent), seq.logprobs.end());
        if (seq.finished()) {
            so.finish_reason = seq.finish_reason;
            so.stop_string = seq.stop_string;
            so.stop_token = seq.stop_token;
            seq.finish_sent = true;
        }
        seq.tokens_sent = generated;
        seq.text_sent = ready;
        seq.logprobs_sent = seq.logprobs.size();
        out.samples.push_back(std::move(so));
    }
    out.finished = all_finished;
    if (!r.queue_time_sent && r.first_scheduled_time >= 0) {
        out.queue_seconds = r.first_scheduled_time - r.arrival_time;
        r.queue_time_sent = true;
    }
    outputs.push_back(std::move(out));
    if (all_finished) requests_.erase(r.id);
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
    st.generation_tokens = generation_tokens_;
    st.device_idle_seconds = model_.backend().device_idle_seconds();
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
