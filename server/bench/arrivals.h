// When each request is sent: vLLM's arrival process. Inter-arrival gaps are
// gamma-distributed with shape `burstiness` and mean 1/rate (burstiness 1 is a
// Poisson process; below 1 burstier, above 1 more regular).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace minfer::bench {

// n raw gaps in seconds, drawn from a generator seeded with `seed`.
std::vector<double> gamma_gaps(size_t n, double rate, double burstiness, uint64_t seed);

// Send times of n requests from the benchmark's start. rate = infinity sends
// all at once. Otherwise the cumulative gaps are rescaled so the last request
// goes out at exactly n/rate, as vLLM does to make throughput comparable
// across seeds.
std::vector<double> arrival_times(size_t n, double rate, double burstiness, uint64_t seed);

}  // namespace minfer::bench
