#include "server/bench/svg_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace minfer::bench {

std::vector<double> nice_ticks(double lo, double hi, int target) {
    if (!(hi > lo)) hi = lo + 1;
    const double raw = (hi - lo) / std::max(1, target);
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    double step = mag;
    for (double m : {1.0, 2.0, 5.0, 10.0})
        if (m * mag >= raw) {
            step = m * mag;
            break;
        }
    // From the first multiple of step at or below lo to the first at or above
    // hi, so the axis covers all the data.
    std::vector<double> ticks;
    const long first = static_cast<long>(std::floor(lo / step + 1e-9));
    const long last = static_cast<long>(std::ceil(hi / step - 1e-9));
    for (long i = first; i <= last; i++) ticks.push_back(static_cast<double>(i) * step);
    return ticks;
}

namespace {

const char* kBlue = "#2b6cb0";
const char* kOrange = "#dd6b20";
const char* kGrey = "#718096";

std::string esc(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '&') out += "&amp;";
        else if (c == '<') out += "&lt;";
        else if (c == '>') out += "&gt;";
        else if (c == '"') out += "&quot;";
        else out += c;
    }
    return out;
}

std::string num(double v) {
    if (v == 0) return "0";
    if (std::abs(v) >= 10000) return fmt::format("{:.0f}k", v / 1000);
    if (std::abs(v) >= 100 || v == std::floor(v)) return fmt::format("{:.0f}", v);
    if (std::abs(v) >= 1) return fmt::format("{:.1f}", v);
    return fmt::format("{:.2g}", v);
}

// A plotting area with data ranges; maps data to pixels.
struct Panel {
    double x, y, w, h;  // pixels
    double x0, x1, y0, y1;
    double px(double v) const { return x + (v - x0) / (x1 - x0) * w; }
    double py(double v) const { return y + h - (v - y0) / (y1 - y0) * h; }
};

// Frame, grid, tick labels and axis titles. Returns the ticks' ranges so the
// panel's ranges can be widened to them first.
void axes(std::string& s, const Panel& p, const std::vector<double>& xt, const std::vector<double>& yt,
          const std::string& xlabel, const std::string& ylabel, const std::string& title) {
    s += fmt::format("<text x='{:.1f}' y='{:.1f}' class='title'>{}</text>\n", p.x, p.y - 12, esc(title));
    for (double t : yt) {
        s += fmt::format("<line x1='{:.1f}' x2='{:.1f}' y1='{:.1f}' y2='{:.1f}' class='grid'/>\n", p.x, p.x + p.w,
                         p.py(t), p.py(t));
        s += fmt::format("<text x='{:.1f}' y='{:.1f}' class='tick' text-anchor='end'>{}</text>\n", p.x - 6,
                         p.py(t) + 4, num(t));
    }
    for (double t : xt) {
        s += fmt::format("<line x1='{:.1f}' x2='{:.1f}' y1='{:.1f}' y2='{:.1f}' class='grid'/>\n", p.px(t), p.px(t),
                         p.y, p.y + p.h);
        s += fmt::format("<text x='{:.1f}' y='{:.1f}' class='tick' text-anchor='middle'>{}</text>\n", p.px(t),
                         p.y + p.h + 16, num(t));
    }
    s += fmt::format("<rect x='{:.1f}' y='{:.1f}' width='{:.1f}' height='{:.1f}' class='frame'/>\n", p.x, p.y, p.w, p.h);
    s += fmt::format("<text x='{:.1f}' y='{:.1f}' class='label' text-anchor='middle'>{}</text>\n", p.x + p.w / 2,
                     p.y + p.h + 36, esc(xlabel));
    s += fmt::format("<text class='label' text-anchor='middle' transform='translate({:.1f},{:.1f}) rotate(-90)'>{}</text>\n",
                     p.x - 44, p.y + p.h / 2, esc(ylabel));
}

void no_data(std::string& s, const Panel& p, const std::string& title, const std::string& why) {
    s += fmt::format("<text x='{:.1f}' y='{:.1f}' class='title'>{}</text>\n", p.x, p.y - 12, esc(title));
    s += fmt::format("<rect x='{:.1f}' y='{:.1f}' width='{:.1f}' height='{:.1f}' class='frame'/>\n", p.x, p.y, p.w, p.h);
    s += fmt::format("<text x='{:.1f}' y='{:.1f}' class='label' text-anchor='middle'>{}</text>\n", p.x + p.w / 2,
                     p.y + p.h / 2, esc(why));
}

// The empirical CDF of `ms` (share of requests at or below x), with the
// median, p90 and p99 marked.
void cdf_panel(std::string& s, double x, double y, double w, double h, std::vector<double> ms, const Stat& st,
               const std::string& title, const std::string& what) {
    if (ms.empty()) return no_data(s, Panel{x, y, w, h, 0, 1, 0, 1}, title, "no data: no successful request with " + what);
    std::sort(ms.begin(), ms.end());
    // Start the axis at 0 unless the values sit in a narrow band far from it
    // (TPOT often does), where 0 would squeeze the curve into a line.
    const double lo_v = ms.front(), hi_v = ms.back() > 0 ? ms.back() : 1;
    const double span = hi_v - lo_v;
    const double lo = span < 0.5 * hi_v ? std::max(0.0, lo_v - std::max(span, 0.05 * hi_v) * 0.25) : 0.0;
    const double hi = span < 0.5 * hi_v ? hi_v + std::max(span, 0.05 * hi_v) * 0.25 : hi_v;
    const std::vector<double> xt = nice_ticks(lo, hi, 6);
    Panel p{x, y, w, h, xt.front(), xt.back(), 0, 100};
    axes(s, p, xt, nice_ticks(0, 100, 5), what + " (ms)", "requests at or below (%)", title);
    std::string path = fmt::format("M{:.1f},{:.1f}", p.px(ms.front()), p.py(0));
    const size_t n = ms.size();
    for (size_t i = 0; i < n; i++) {
        // A step up at each value: 100*i/n just before, 100*(i+1)/n after.
        path += fmt::format(" L{:.1f},{:.1f} L{:.1f},{:.1f}", p.px(ms[i]), p.py(100.0 * i / n), p.px(ms[i]),
                            p.py(100.0 * (i + 1) / n));
    }
    s += fmt::format("<path d='{}' fill='none' stroke='{}' stroke-width='2'/>\n", path, kBlue);
    // Percentiles: dashed lines (p50, p90, p99 from left to right: they are
    // ordered), their values in a line under the axis, where no label can
    // collide with the curve or with each other.
    for (double v : {st.median, st.p90, st.p99})
        s += fmt::format("<line x1='{0:.1f}' x2='{0:.1f}' y1='{1:.1f}' y2='{2:.1f}' stroke='{3}' stroke-dasharray='4 3'/>\n",
                         p.px(v), p.y, p.y + p.h, kOrange);
    s += fmt::format("<text x='{:.1f}' y='{:.1f}' class='mark' text-anchor='middle'>dashed: p50 {} ms · p90 {} ms · "
                     "p99 {} ms</text>\n",
                     p.x + p.w / 2, p.y + p.h + 54, num(st.median), num(st.p90), num(st.p99));
}

}  // namespace

std::string render_svg(const std::vector<RequestRecord>& records, const Summary& sm, const std::string& title,
                       const std::string& subtitle) {
    const double W = 1000, H = 800;
    std::string s = fmt::format(
        "<svg xmlns='http://www.w3.org/2000/svg' width='{0}' height='{1}' viewBox='0 0 {0} {1}' "
        "font-family='Helvetica, Arial, sans-serif'>\n"
        "<style>.title{{font-size:15px;font-weight:bold;fill:#1a202c}} .tick{{font-size:11px;fill:#4a5568}} "
        ".label{{font-size:12px;fill:#2d3748}} .mark{{font-size:11px;fill:{2}}} "
        ".grid{{stroke:#e2e8f0;stroke-width:1}} .frame{{fill:none;stroke:#a0aec0}}</style>\n"
        "<rect width='100%' height='100%' fill='white'/>\n",
        W, H, kOrange);
    s += fmt::format("<text x='24' y='32' font-size='19' font-weight='bold' fill='#1a202c'>{}</text>\n", esc(title));
    s += fmt::format("<text x='24' y='54' font-size='13' fill='{}'>{}</text>\n", kGrey, esc(subtitle));
    s += fmt::format(
        "<text x='24' y='76' font-size='13' fill='#2d3748'>{} ok, {} failed in {:.2f} s · {:.2f} req/s · {:.1f} output "
        "tok/s · peak {:.0f} tok/s · TTFT p50 {:.1f} ms · TPOT p50 {:.2f} ms · E2EL p50 {:.0f} ms</text>\n",
        sm.completed, sm.failed, sm.duration, sm.request_throughput, sm.output_throughput, sm.max_output_tokens_per_s,
        sm.ttft.median, sm.tpot.median, sm.e2el.median);

    std::vector<double> ttft_ms;
    for (const RequestRecord& r : records)
        if (r.success) ttft_ms.push_back(r.ttft * 1e3);
    std::vector<double> tpot_ms;
    for (double t : sm.tpots) tpot_ms.push_back(t * 1e3);
    cdf_panel(s, 90, 125, 360, 250, ttft_ms, sm.ttft, "Time to first token", "TTFT");
    cdf_panel(s, 590, 125, 360, 250, tpot_ms, sm.tpot, "Time per output token (excl. 1st)", "TPOT");

    // Throughput over time: output tokens (chunks) per one-second bucket as
    // bars, requests in flight as a step line on the right axis.
    const Timeline tl = timeline(records);
    const auto steps = in_flight_steps(records, false);
    const std::string tp_title = "Throughput over time";
    if (tl.tokens_per_s.empty()) {
        no_data(s, Panel{90, 470, 860, 250, 0, 1, 0, 1}, tp_title, "no data: no request succeeded");
    } else {
        double first = INFINITY;
        for (const RequestRecord& r : records)
            if (r.success) first = std::min(first, r.start);
        const double max_tok = *std::max_element(tl.tokens_per_s.begin(), tl.tokens_per_s.end());
        int32_t max_conc = 1;
        for (const auto& st : steps) max_conc = std::max(max_conc, st.second);
        // The axis ends with the last answer (vLLM's bucket count has a spare one).
        double span = 0;
        for (const RequestRecord& r : records)
            if (r.success) span = std::max(span, r.start + r.latency - first);
        for (size_t i = 0; i < tl.tokens_per_s.size(); i++)
            if (tl.tokens_per_s[i] > 0) span = std::max(span, static_cast<double>(i + 1));
        const std::vector<double> xt = nice_ticks(0, std::max(1.0, std::ceil(span)), 10);
        const std::vector<double> yt = nice_ticks(0, max_tok > 0 ? max_tok : 1, 5);
        Panel p{90, 470, 860, 250, 0, xt.back(), 0, yt.back()};
        axes(s, p, xt, yt, "time since the first request (s)", "output tokens / s", tp_title);
        const double bw = p.px(1) - p.px(0);
        for (size_t i = 0; i < tl.tokens_per_s.size(); i++) {
            const double v = tl.tokens_per_s[i];
            s += fmt::format("<rect x='{:.1f}' y='{:.1f}' width='{:.1f}' height='{:.1f}' fill='{}' opacity='0.75'/>\n",
                             p.px(static_cast<double>(i)) + bw * 0.08, p.py(v), bw * 0.84, p.py(0) - p.py(v), kBlue);
        }
        // Right axis: requests in flight.
        const std::vector<double> ct = nice_ticks(0, max_conc, 5);
        Panel q = p;
        q.y1 = ct.back();
        for (double t : ct)
            s += fmt::format("<text x='{:.1f}' y='{:.1f}' class='tick' fill='{}'>{}</text>\n", q.x + q.w + 6,
                             q.py(t) + 4, kOrange, num(t));
        s += fmt::format("<text class='label' text-anchor='middle' transform='translate({:.1f},{:.1f}) rotate(90)'>"
                         "requests in flight</text>\n",
                         q.x + q.w + 36, q.y + q.h / 2);
        std::string path;
        int32_t prev = 0;
        for (const auto& [t, n] : steps) {
            const double x = q.px(std::clamp(t - first, 0.0, q.x1));
            path += path.empty() ? fmt::format("M{:.1f},{:.1f}", x, q.py(0)) : "";
            path += fmt::format(" L{:.1f},{:.1f} L{:.1f},{:.1f}", x, q.py(prev), x, q.py(n));
            prev = n;
        }
        s += fmt::format("<path d='{}' fill='none' stroke='{}' stroke-width='1.5'/>\n", path, kOrange);
        // Legend, to the right of the panel's title where it hides no data.
        const double lx = p.x + p.w - 420, ly = p.y - 24;
        s += fmt::format("<rect x='{:.1f}' y='{:.1f}' width='12' height='12' fill='{}' opacity='0.75'/>\n", lx, ly,
                         kBlue);
        s += fmt::format("<text x='{:.1f}' y='{:.1f}' class='label'>output tokens per second (left)</text>\n", lx + 18,
                         ly + 10);
        s += fmt::format("<line x1='{:.1f}' x2='{:.1f}' y1='{:.1f}' y2='{:.1f}' stroke='{}' stroke-width='2'/>\n",
                         lx + 220, lx + 236, ly + 6, ly + 6, kOrange);
        s += fmt::format("<text x='{:.1f}' y='{:.1f}' class='label'>requests in flight (right)</text>\n", lx + 242,
                         ly + 10);
    }
    s += fmt::format("<text x='24' y='{:.0f}' font-size='11' fill='{}'>minfer bench serve · metrics as vLLM's "
                     "benchmark defines them · dashed lines: percentiles</text>\n",
                     H - 16, kGrey);
    s += "</svg>\n";
    return s;
}

}  // namespace minfer::bench
