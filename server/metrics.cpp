#include "server/metrics.h"

#include <fmt/format.h>

#include <algorithm>

namespace minfer {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
    const size_t i = size_t(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
    ++counts_[i];
    sum_ += value;
    ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help,
                       const std::string& labels) const {
    out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
    int64_t cumulative = 0;
    for (size_t i = 0; i < bounds_.size(); ++i) {
        cumulative += counts_[i];
        out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, bounds_[i], cumulative);
    }
    out += fmt::format("{}_bucket{{{},le=\"+Inf\"}} {}\n{}_sum{{{}}} {}\n{}_count{{{}}} {}\n", name, labels, count_,
                       name, labels, sum_, name, labels, count_);
}

// vLLM's bucket boundaries for the same histograms.
ServerMetrics::ServerMetrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
             80.0, 160.0, 640.0, 2560.0}),
      itl_({0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}),
      e2e_({0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
            960.0, 1920.0, 7680.0}),
      queue_({0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
              960.0, 1920.0, 7680.0}) {}

void ServerMetrics::observe(const RequestTiming& t) {
    std::lock_guard lock(mutex_);
    if (t.ttft_seconds >= 0) ttft_.observe(t.ttft_seconds);
    for (double s : t.itl_seconds) itl_.observe(s);
    if (t.queue_seconds >= 0) queue_.observe(t.queue_seconds);
    e2e_.observe(t.e2e_seconds);
    if (t.finish_reason == "stop") ++finished_stop_;
    else if (t.finish_reason == "length") ++finished_length_;
    else if (t.finish_reason == "abort") ++finished_abort_;
    else ++finished_error_;
}

std::string ServerMetrics::render(const EngineStats& st, const std::string& model_name) const {
    std::string out;
    const std::string label = fmt::format("model_name=\"{}\"", model_name);
    auto metric = [&](const char* name, const char* type, const char* help, double value) {
        out += fmt::format("# HELP minfer:{} {}\n# TYPE minfer:{} {}\nminfer:{}{{{}}} {}\n", name, help, name, type,
                           name, label, value);
    };
    metric("num_requests_running", "gauge", "Requests in the running batch.", double(st.num_running));
    metric("num_requests_waiting", "gauge", "Requests waiting to be scheduled.", double(st.num_waiting));
    metric("kv_cache_usage_perc", "gauge", "Fraction of KV-cache blocks in use (1 = full).", st.kv_cache_usage);
    metric("num_kv_blocks", "gauge", "KV-cache blocks in the pool.", double(st.num_kv_blocks));
    metric("prefix_cache_queries", "counter", "Prompt tokens looked up in the prefix cache.",
           double(st.prefix_cache_queries));
    metric("prefix_cache_hits", "counter", "Prompt tokens found in the prefix cache (whole blocks of them).", double(st.prefix_cache_hits));
    metric("num_preemptions", "counter", "Sequences preempted (their KV blocks freed) to make room.",
           double(st.num_preemptions));
    metric("prompt_tokens_total", "counter", "Prompt tokens admitted.", double(st.prompt_tokens));
    metric("generation_tokens_total", "counter", "Tokens generated.", double(st.generation_tokens));
    metric("prefill_computed_tokens_total", "counter",
           "Prompt tokens this instance ran through the model (not those found in the prefix cache or received as KV).",
           double(st.prefill_computed_tokens));
    metric("kv_parked_blocks", "gauge", "KV blocks held for KV transfers (a prefill's to send, a decode's received).",
           double(st.kv_parked_blocks));
    metric("kv_staged_bytes", "gauge", "K/V bytes a prefill instance holds in host memory for KV transfers.",
           double(st.kv_staged_bytes));
    metric("kv_parked_expired_total", "counter", "KV transfers whose blocks expired unsent or unclaimed.",
           double(st.kv_parked_expired));
    metric("kv_received_unused_total", "counter",
           "Requests naming a KV transfer that was missing or unusable (they computed their prompt here).",
           double(st.kv_received_unused));
    metric("engine_steps_total", "counter", "Engine steps (forward passes).", double(st.steps));
    metric("device_idle_seconds_total", "counter",
           "Time the GPU sat idle between consecutive engine steps while requests were waiting (host work not hidden behind it; 0 on the CPU).",
           st.device_idle_seconds);
    // vLLM's speculative-decoding counters (prometheus_client adds _total to a counter's name).
    const SpecDecodeStats& sd = st.spec_decode;
    metric("spec_decode_num_drafts_total", "counter", "Verifications of drafts: one per speculating sequence and step.",
           double(sd.num_drafts));
    metric("spec_decode_num_draft_tokens_total", "counter", "Draft tokens verified.", double(sd.num_draft_tokens));
    metric("spec_decode_num_accepted_tokens_total", "counter", "Draft tokens accepted.", double(sd.num_accepted_tokens));
    out += "# HELP minfer:spec_decode_num_accepted_tokens_per_pos_total Draft tokens accepted, by position in the draft.\n"
           "# TYPE minfer:spec_decode_num_accepted_tokens_per_pos_total counter\n";
    for (size_t i = 0; i < sd.accepted_per_pos.size(); ++i)
        out += fmt::format("minfer:spec_decode_num_accepted_tokens_per_pos_total{{{},position=\"{}\"}} {}\n", label, i,
                           sd.accepted_per_pos[i]);

    // A model split over ranks (-tp N): what its steps all-reduce, and expert parallelism's balance.
    const ParallelStats& ps = st.parallel;
    metric("tensor_parallel_size", "gauge", "Ranks the model is split over (1: not split).", double(ps.ranks));
    metric("all_reduced_floats_total", "counter", "Floats rank 0 all-reduced over the ranks (each step's partial sums).",
           double(ps.floats_all_reduced));
    if (!ps.expert_pairs.empty()) {
        out += "# HELP minfer:expert_pairs_total (token, expert) pairs routed to each rank's experts (expert parallelism).\n"
               "# TYPE minfer:expert_pairs_total counter\n";
        for (size_t r = 0; r < ps.expert_pairs.size(); ++r)
            out += fmt::format("minfer:expert_pairs_total{{{},rank=\"{}\"}} {}\n", label, r, ps.expert_pairs[r]);
        metric("expert_imbalance_mean", "gauge", "Per step, the busiest rank's pairs over the mean, averaged (1: even).",
               ps.imbalance_mean());
        metric("expert_imbalance_max", "gauge", "The worst step's busiest rank's pairs over the mean.", ps.imbalance_max);
    }

    std::lock_guard lock(mutex_);
    out += "# HELP minfer:request_success_total Finished requests by finish reason.\n"
           "# TYPE minfer:request_success_total counter\n";
    const std::pair<const char*, int64_t> reasons[] = {
        {"stop", finished_stop_}, {"length", finished_length_}, {"abort", finished_abort_}, {"error", finished_error_}};
    for (const auto& [reason, n] : reasons)
        out += fmt::format("minfer:request_success_total{{{},finished_reason=\"{}\"}} {}\n", label, reason, n);
    ttft_.render(out, "minfer:time_to_first_token_seconds", "Time from arrival to the first token.", label);
    itl_.render(out, "minfer:inter_token_latency_seconds", "Time between consecutive token outputs.", label);
    e2e_.render(out, "minfer:e2e_request_latency_seconds", "Time from arrival to the last token.", label);
    queue_.render(out, "minfer:request_queue_time_seconds", "Time from arrival to the first scheduled step.", label);
    return out;
}

}  // namespace minfer
