// The benchmark loop: sends every prompt at its arrival time (at most
// --max-concurrency at once), streams the answers, and records what each
// request did. One io_context on the calling thread runs it all.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <boost/json/object.hpp>

#include "server/bench/dataset.h"
#include "server/bench/http_stream_client.h"
#include "server/bench/metrics.h"

namespace minfer {
class Tokenizer;
}

namespace minfer::bench {

struct RunOptions {
    Url url;
    std::string endpoint = "/v1/completions";
    bool chat = false;  // the chat completions API
    std::string model;
    std::string api_key;
    bool ignore_eos = false;
    boost::json::object extra_body;  // fields added to every request body
    double request_rate = INFINITY;
    double burstiness = 1.0;
    int32_t max_concurrency = 0;  // 0: no limit
    uint64_t seed = 0;
    double timeout_s = 600;
    bool progress = true;  // the progress bar on stderr
};

struct RunResult {
    std::vector<RequestRecord> records;  // in prompt order
    double duration = 0;                 // from the first send to the last answer, seconds
};

// Counts output tokens with `tok` where the server reports no usage.
RunResult run_benchmark(const RunOptions& opts, const std::vector<BenchPrompt>& prompts, const Tokenizer& tok);

}  // namespace minfer::bench
