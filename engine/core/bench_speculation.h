// `minfer bench latency` with speculative decoding: the same greedy requests
// through the engine with and without a proposer, in one run, so the speedup
// is measured on one machine state. Greedy output must be the same both ways;
// a difference is an error, not a figure.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/core/bench_latency.h"
#include "engine/spec/spec_config.h"
#include "engine/spec/spec_stats.h"
#include "engine/text/tokenizer.h"

namespace minfer {

struct EngineDecodeRun {
    double prefill_seconds = 0;  // median: from the requests' arrival to every first token
    double decode_seconds = 0;   // median: from there to the last token
    double decode_tok_s = 0;     // batch * (output_len - 1) / decode_seconds
    int64_t steps = 0;           // engine steps of one run (decode steps after the prefill's)
    SpecDecodeStats spec;        // of one run
};

struct SpeculationBenchResult {
    EngineDecodeRun plain, speculative;
    double speedup = 0;  // speculative.decode_tok_s / plain.decode_tok_s
};

// `batch` copies of `prompt` (greedy, EOS ignored, output_len tokens each)
// through an engine without and with `spec`, o.repetitions times each after
// o.warmup. Throws std::runtime_error if the outputs differ.
// draft_model: the proposer's model when spec.method is Draft.
SpeculationBenchResult bench_speculation(const Model& model, const Tokenizer& tokenizer, const LatencyOptions& o,
                                         const std::vector<int32_t>& prompt, const SpeculativeConfig& spec,
                                         const Model* draft_model = nullptr);

}  // namespace minfer
