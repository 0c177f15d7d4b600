// The server's Prometheus metrics (GET /metrics, text format 0.0.4): the
// engine's gauges and counters, read from its statistics when scraped, and
// per-request latency histograms the server observes itself. Names follow
// vLLM's with the minfer: prefix.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/core/llm_engine.h"

namespace minfer {

class Histogram {
public:
    explicit Histogram(std::vector<double> upper_bounds);
    void observe(double value);
    // "# HELP/# TYPE" and the _bucket (cumulative, le="+Inf" last), _sum and _count lines.
    // `labels`: the series' labels, e.g. model_name="x" (vLLM labels every series with the model).
    void render(std::string& out, const std::string& name, const std::string& help, const std::string& labels) const;
    int64_t count() const { return count_; }

private:
    std::vector<double> bounds_;
    std::vector<int64_t> counts_;  // per bucket, not cumulative; one more for +Inf
    double sum_ = 0;
    int64_t count_ = 0;
};

// One finished request as the server saw it.
struct RequestTiming {
    double queue_seconds = -1;   // arrival to first scheduled (from the engine); < 0 unknown
    double ttft_seconds = -1;    // arrival at the server to the first token; < 0: none came
    std::vector<double> itl_seconds;  // between consecutive token outputs
    double e2e_seconds = 0;
    std::string finish_reason;   // "stop", "length", "abort", "error"
};

class ServerMetrics {
public:
    ServerMetrics();
    void observe(const RequestTiming& t);
    std::string render(const EngineStats& stats, const std::string& model_name) const;

private:
    mutable std::mutex mutex_;
    Histogram ttft_, itl_, e2e_, queue_;
    int64_t finished_stop_ = 0, finished_length_ = 0, finished_abort_ = 0, finished_error_ = 0;
};

}  // namespace minfer
