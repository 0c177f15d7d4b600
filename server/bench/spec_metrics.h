// The server's speculative-decoding counters, read from its Prometheus text
// (GET /metrics) before and after a run: minfer's names (minfer:spec_decode_*)
// or vLLM's (vllm:spec_decode_*), with or without the _total suffix.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace minfer::bench {

struct SpecCounters {
    double drafts = 0, draft_tokens = 0, accepted = 0;
    std::vector<double> accepted_per_pos;

    double acceptance_rate() const { return draft_tokens > 0 ? accepted / draft_tokens : 0.0; }
    double acceptance_length() const { return drafts > 0 ? 1.0 + accepted / drafts : 0.0; }
};

// nullopt when the text has no spec_decode_num_drafts counter (the server does not speculate or say).
std::optional<SpecCounters> parse_spec_counters(std::string_view prometheus_text);
// What happened between two readings.
SpecCounters spec_difference(const SpecCounters& after, const SpecCounters& before);

}  // namespace minfer::bench
