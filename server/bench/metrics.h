// The numbers `minfer bench serve` reports, with vLLM's definitions
// (vllm/benchmarks/serve.py calculate_metrics), so a result compares with
// `vllm bench serve` directly. Pure functions over per-request records.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace minfer::bench {

// What one request did, as the client saw it. Times are seconds; start is
// measured from the benchmark's start.
struct RequestRecord {
    bool success = false;
    int32_t prompt_len = 0;     // the server's usage.prompt_tokens when reported
    int32_t output_tokens = 0;  // usage.completion_tokens, else the tokenizer's count of `text`
    double start = 0;           // when the request was sent (after any --max-concurrency wait)
    double ttft = 0;            // to the first chunk with choices
    std::vector<double> itl;    // gaps between consecutive chunks with choices
    double latency = 0;         // to the last chunk with choices (vLLM's E2EL)
    double end = 0;             // when the client was done with it, failed or not (for the in-flight plot)
    std::string text;           // generated text
    std::string error;          // empty on success
};

// Service-level objectives of --goodput, in milliseconds; a request is "good"
// when it meets every one given.
struct Slo {
    std::optional<double> ttft_ms, tpot_ms, e2el_ms;
    bool empty() const { return !ttft_ms && !tpot_ms && !e2el_ms; }
};
// "ttft:200,tpot:50" (commas or spaces between pairs); throws std::invalid_argument.
Slo parse_goodput(const std::string& spec);

// mean, median, std (population, like numpy's), and the percentiles we print.
struct Stat {
    double mean = 0, median = 0, std = 0, p90 = 0, p99 = 0;
};

// numpy.percentile's default (linear interpolation between closest ranks);
// 0 for no values, as vLLM's `np.percentile(x or 0, p)` gives.
double percentile(std::vector<double> values, double p);
// All of Stat in milliseconds from values in seconds.
Stat stat_ms(const std::vector<double>& seconds);

struct Summary {
    double duration = 0;
    int32_t completed = 0, failed = 0;
    int64_t total_input = 0, total_output = 0;
    double request_throughput = 0, request_goodput = 0, output_throughput = 0, total_token_throughput = 0;
    Stat ttft, tpot, itl, e2el;
    std::vector<double> tpots;         // per successful request with > 1 output token (seconds)
    std::vector<int32_t> output_lens;  // per request, 0 for failed ones
    double max_output_tokens_per_s = 0;
    int32_t max_concurrent_requests = 0;
};

Summary summarize(const std::vector<RequestRecord>& records, double duration, const Slo& slo);

// Activity per one-second bucket from the first request's start, as vLLM's
// peak-throughput figure counts it: chunks received, and requests active
// during the second (successful requests only).
struct Timeline {
    std::vector<double> tokens_per_s;
    std::vector<double> concurrency;
};
Timeline timeline(const std::vector<RequestRecord>& records);

// Exact number of requests in flight over time, as a step function: points
// (t, n) meaning n requests are in flight from t until the next point. Each
// request occupies [start, end); vLLM's peak counts successful ones only.
std::vector<std::pair<double, int32_t>> in_flight_steps(const std::vector<RequestRecord>& records,
                                                        bool successful_only);

}  // namespace minfer::bench
