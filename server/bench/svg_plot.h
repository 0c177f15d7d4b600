// `--plot FILE.svg`: one self-contained picture of a run, hand-written SVG
// (no plotting library): the TTFT and TPOT distributions as CDFs with their
// percentiles marked, and throughput over time (output tokens per second)
// with the number of requests in flight on a second axis.
#pragma once

#include <string>
#include <vector>

#include "server/bench/metrics.h"

namespace minfer::bench {

// `title` names the run (model, server); `subtitle` carries its settings.
std::string render_svg(const std::vector<RequestRecord>& records, const Summary& summary, const std::string& title,
                       const std::string& subtitle);

// Tick positions for an axis over [lo, hi]: 1, 2 or 5 times a power of ten
// apart, about `target` of them, the first at or below lo, the last at or
// above hi.
std::vector<double> nice_ticks(double lo, double hi, int target);

}  // namespace minfer::bench
