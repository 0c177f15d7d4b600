// `minfer bench latency`: prefill and decode speed of one model on one backend,
// measured through the same ModelRunner and step plans the engine uses.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/model/model.h"

namespace minfer {

struct LatencyOptions {
    int32_t batch = 1;         // sequences decoded together
    int32_t input_len = 128;   // prompt tokens per sequence (random ids)
    int32_t output_len = 64;   // decode steps
    int32_t repetitions = 5;   // measured runs (medians are reported)
    int32_t warmup = 1;        // unmeasured runs first
    int32_t block_size = 16;
    uint64_t seed = 0;
    bool enforce_eager = false;  // no CUDA graphs
    // > 0: the device profiler collects the first profile_steps decode steps of
    // the last run, and nothing else (backend.profiler_range; for ncu).
    int32_t profile_steps = 0;
    // The device profiler collects the prefill of the last run (for ncu).
    bool profile_prefill = false;
    std::optional<KVDType> kv_dtype;  // the KV pool's elements; unset: the backend's default
};

// What the hardware can do at most, for roofline fractions: the H200 we
// measured (device-to-device copy; dense GEMM at 8192^3, bf16, or FP8 E4M3 when
// the layers' weights are FP8, which is what their prefill GEMMs then run).
struct HardwareLimits {
    double bytes_per_s = 0;
    double flop_per_s = 0;
};
// Zeros when unknown (the CPU).
HardwareLimits hardware_limits(const std::string& backend_name, bool fp8_weights = false);

struct LatencyResult {
    double prefill_seconds = 0;      // median time to prefill batch * input_len tokens
    double decode_seconds = 0;       // median time of output_len decode steps
    double prefill_tok_s = 0;
    double decode_tok_s = 0;         // batch * output_len / decode_seconds
    double decode_step_ms = 0;
    double decode_bytes_per_step = 0;  // weights + KV read by one decode step
    double decode_gb_s = 0;          // achieved memory bandwidth while decoding
    double prefill_flops = 0;        // floating-point operations of one prefill
    double prefill_tflop_s = 0;
    // Decode steps on the device timeline (zeros on the CPU).
    double decode_d2h_bytes_per_step = 0;  // device-to-host bytes (the sampled ids)
    double decode_h2d_bytes_per_step = 0;  // host-to-device bytes (the step's arrays)
    double decode_idle_gap_us = 0;         // median device idle time between consecutive steps
    int32_t recordings = 0;                // CUDA graphs captured
    KVDType kv_dtype = KVDType::F32;       // the KV pool's elements
    std::vector<double> prefill_runs, decode_runs;  // every measured run, seconds
};

LatencyResult bench_latency(const Model& model, const LatencyOptions& options);

// The median of the runs (the mean of the middle two for an even count).
double median(std::vector<double> runs);

}  // namespace minfer
