#include "server/bench/metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>
#include <stdexcept>

namespace minfer::bench {

Slo parse_goodput(const std::string& spec) {
    Slo slo;
    std::string s = spec;
    std::replace(s.begin(), s.end(), ',', ' ');
    std::istringstream in(s);
    std::string pair;
    while (in >> pair) {
        const size_t colon = pair.find(':');
        if (colon == std::string::npos)
            throw std::invalid_argument("--goodput wants NAME:MS pairs (ttft, tpot, e2el), got '" + pair + "'");
        const std::string name = pair.substr(0, colon), value = pair.substr(colon + 1);
        double ms = 0;
        try {
            size_t used = 0;
            ms = std::stod(value, &used);
            if (used != value.size()) throw std::invalid_argument(value);
        } catch (const std::exception&) {
            throw std::invalid_argument("--goodput: '" + value + "' is not a number of milliseconds");
        }
        if (!(ms >= 0)) throw std::invalid_argument("--goodput: " + name + " must be >= 0 ms");
        if (name == "ttft") slo.ttft_ms = ms;
        else if (name == "tpot") slo.tpot_ms = ms;
        else if (name == "e2el") slo.e2el_ms = ms;
        else throw std::invalid_argument("--goodput: unknown metric '" + name + "' (ttft, tpot, e2el)");
    }
    if (slo.empty()) throw std::invalid_argument("--goodput wants at least one NAME:MS pair");
    return slo;
}

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const double rank = p / 100.0 * static_cast<double>(v.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(rank));
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

Stat stat_ms(const std::vector<double>& seconds) {
    Stat s;
    if (seconds.empty()) return s;
    const double n = static_cast<double>(seconds.size());
    const double mean = std::accumulate(seconds.begin(), seconds.end(), 0.0) / n;
    double var = 0;
    for (double x : seconds) var += (x - mean) * (x - mean);
    s.mean = mean * 1e3;
    s.std = std::sqrt(var / n) * 1e3;  // ddof = 0, as numpy.std
    s.median = percentile(seconds, 50) * 1e3;
    s.p90 = percentile(seconds, 90) * 1e3;
    s.p99 = percentile(seconds, 99) * 1e3;
    return s;
}

Summary summarize(const std::vector<RequestRecord>& records, double duration, const Slo& slo) {
    Summary m;
    m.duration = duration;
    std::vector<double> ttfts, itls, e2els, all_tpots;
    for (const RequestRecord& r : records) {
        if (!r.success) {
            m.failed++;
            m.output_lens.push_back(0);
            continue;
        }
        m.completed++;
        m.output_lens.push_back(r.output_tokens);
        m.total_input += r.prompt_len;
        m.total_output += r.output_tokens;
        // TPOT excludes the first token; a one-token answer has none (and
        // counts as 0 against a TPOT objective, as vLLM does).
        double tpot = 0;
        if (r.output_tokens > 1) {
            tpot = (r.latency - r.ttft) / (r.output_tokens - 1);
            m.tpots.push_back(tpot);
        }
        all_tpots.push_back(tpot);
        itls.insert(itls.end(), r.itl.begin(), r.itl.end());
        ttfts.push_back(r.ttft);
        e2els.push_back(r.latency);
    }
    int32_t good = 0;
    if (!slo.empty()) {
        for (size_t i = 0; i < ttfts.size(); i++) {
            // Compared in seconds, as vLLM does, so borderline cases agree.
            const bool ok = (!slo.ttft_ms || *slo.ttft_ms / 1000 >= ttfts[i]) &&
                            (!slo.tpot_ms || *slo.tpot_ms / 1000 >= all_tpots[i]) &&
                            (!slo.e2el_ms || *slo.e2el_ms / 1000 >= e2els[i]);
            good += ok;
        }
    }
    const double d = duration > 0 ? duration : 1.0;
    m.request_throughput = m.completed / d;
    m.request_goodput = good / d;
    m.output_throughput = static_cast<double>(m.total_output) / d;
    m.total_token_throughput = static_cast<double>(m.total_input + m.total_output) / d;
    m.ttft = stat_ms(ttfts);
    m.tpot = stat_ms(m.tpots);
    m.itl = stat_ms(itls);
    m.e2el = stat_ms(e2els);

    const Timeline t = timeline(records);
    for (double x : t.tokens_per_s) m.max_output_tokens_per_s = std::max(m.max_output_tokens_per_s, x);
    for (const auto& [time, n] : in_flight_steps(records, true)) m.max_concurrent_requests = std::max(m.max_concurrent_requests, n);
    return m;
}

Timeline timeline(const std::vector<RequestRecord>& records) {
    Timeline t;
    double first = INFINITY, last = -INFINITY;
    for (const RequestRecord& r : records) {
        if (!r.success) continue;
        first = std::min(first, r.start);
        last = std::max(last, r.start + r.latency);
    }
    if (!(first <= last)) return t;
    const size_t buckets = static_cast<size_t>(std::ceil(last - first)) + 1;
    t.tokens_per_s.assign(buckets, 0);
    t.concurrency.assign(buckets, 0);
    for (const RequestRecord& r : records) {
        if (!r.success) continue;
        // Chunk arrival times, rebuilt from TTFT and the ITLs.
        double at = r.start + r.ttft;
        auto count = [&](double time) {
            const double b = std::floor(time - first);
            if (b >= 0 && b < static_cast<double>(buckets)) t.tokens_per_s[static_cast<size_t>(b)] += 1;
        };
        count(at);
        for (double gap : r.itl) count(at += gap);
        const size_t from = static_cast<size_t>(r.start - first);
        const size_t to = std::min(buckets, static_cast<size_t>(std::ceil(r.start + r.latency - first)));
        for (size_t s = from; s < to; s++) t.concurrency[s] += 1;
    }
    return t;
}

std::vector<std::pair<double, int32_t>> in_flight_steps(const std::vector<RequestRecord>& records,
                                                        bool successful_only) {
    // Sweep over [start, end) intervals; at equal times a departure goes
    // first, so back-to-back requests do not count as overlapping.
    std::vector<std::pair<double, int32_t>> events;
    for (const RequestRecord& r : records) {
        if (successful_only && !r.success) continue;
        const double end = r.success ? r.start + r.latency : std::max(r.start, r.end);
        events.emplace_back(r.start, +1);
        events.emplace_back(end, -1);
    }
    std::sort(events.begin(), events.end());
    std::vector<std::pair<double, int32_t>> steps;
    int32_t n = 0;
    for (const auto& [time, delta] : events) {
        n += delta;
        if (!steps.empty() && steps.back().first == time) steps.back().second = n;
        else steps.emplace_back(time, n);
    }
    return steps;
}

}  // namespace minfer::bench
