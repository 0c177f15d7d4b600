#include "server/bench/runner.h"

#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstdio>
#include <string>

#include "server/bench/arrivals.h"
#include "server/bench/openai_stream.h"
#include "server/bench/sse_parser.h"
#include "engine/text/tokenizer.h"

namespace minfer::bench {

namespace asio = boost::asio;
using asio::use_awaitable;
using Clock = std::chrono::steady_clock;

namespace {

std::string first_line(const std::string& s, size_t max = 300) {
    std::string out = s.substr(0, s.find('\n'));
    return out.size() > max ? out.substr(0, max) + "..." : out;
}

// The progress bar: redrawn in place on a terminal, a line now and then in a log.
struct Progress {
    bool enabled, tty;
    size_t total;

    void draw(size_t done, size_t failed, int32_t in_flight, double elapsed, bool last) const {
        if (!enabled) return;
        const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0;
        if (tty) {
            const int width = 30;
            const int filled = total ? static_cast<int>(width * done / total) : width;
            std::string bar(static_cast<size_t>(filled), '#');
            bar.resize(width, '.');
            std::fprintf(stderr, "\r\033[K%zu/%zu [%s] %.1f s  %.2f req/s  %d in flight  %zu failed%s", done, total,
                         bar.c_str(), elapsed, rate, in_flight, failed, last ? "\n" : "");
        } else {
            std::fprintf(stderr, "progress: %zu/%zu requests, %.1f s, %.2f req/s, %d in flight, %zu failed\n", done,
                         total, elapsed, rate, in_flight, failed);
        }
        std::fflush(stderr);
    }
};

}  // namespace

RunResult run_benchmark(const RunOptions& o, const std::vector<BenchPrompt>& prompts, const Tokenizer& tok) {
    asio::io_context io;
    HttpClient client(io, o.url, o.api_key);
    const size_t n = prompts.size();
    const std::vector<double> arrivals = arrival_times(n, o.request_rate, o.burstiness, o.seed);
    const auto timeout = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.timeout_s));

    RunResult result;
    result.records.resize(n);
    int32_t in_flight = 0;
    size_t finished = 0, failed = 0;
    const Progress progress{o.progress, isatty(STDERR_FILENO) == 1, n};
    // Timers used as condition variables: a finishing request cancels them.
    asio::steady_timer slot_freed(io), progress_tick(io);

    const auto t0 = Clock::now();
    auto now = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };

    auto one_request = [&](size_t i) -> asio::awaitable<void> {
        RequestRecord& rec = result.records[i];
        rec.prompt_len = prompts[i].prompt_len;
        rec.start = now();
        OpenAIStream stream(rec, o.chat);
        SseParser sse;
        auto on_body = [&](std::string_view bytes) {
            for (const std::string& event : sse.feed(bytes)) stream.on_event(event, now());
        };
        HttpResult r = co_await client.request("POST", o.endpoint, request_body(prompts[i], o.model, o.chat, o.ignore_eos, o.extra_body),
                                               timeout, on_body);
        if (r.error.empty() && r.status == 200) {
            try {
                for (const std::string& event : sse.finish()) stream.on_event(event, now());
            } catch (const std::exception& e) {
                r.error = e.what();
            }
        }
        rec.end = now();
        if (!r.error.empty()) rec.error = r.error;
        else if (r.status != 200) rec.error = "HTTP " + std::to_string(r.status) + ": " + first_line(r.body);
        else if (!stream.got_chunk()) rec.error = "the answer had no chunk with choices (does the server stream?)";
        rec.success = rec.error.empty();
        if (rec.success) {
            rec.latency = stream.last_chunk_time() - rec.start;
            if (!stream.got_usage()) rec.output_tokens = static_cast<int32_t>(tok.encode(rec.text, false).size());
        } else {
            rec.itl.clear();
            rec.ttft = 0;
            rec.output_tokens = 0;
            failed++;
        }
        in_flight--;
        finished++;
        slot_freed.cancel();
        if (finished == n) {
            result.duration = now();
            progress_tick.cancel();
        }
    };

    auto dispatch = [&]() -> asio::awaitable<void> {
        asio::steady_timer wait(io);
        boost::system::error_code ec;
        for (size_t i = 0; i < n; i++) {
            if (arrivals[i] > 0) {
                wait.expires_at(t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrivals[i])));
                co_await wait.async_wait(asio::redirect_error(use_awaitable, ec));
            }
            while (o.max_concurrency > 0 && in_flight >= o.max_concurrency) {
                slot_freed.expires_at(Clock::time_point::max());
                co_await slot_freed.async_wait(asio::redirect_error(use_awaitable, ec));
            }
            in_flight++;
            asio::co_spawn(io, one_request(i), asio::detached);
        }
    };

    auto show_progress = [&]() -> asio::awaitable<void> {
        boost::system::error_code ec;
        while (finished < n) {
            progress_tick.expires_after(progress.tty ? std::chrono::milliseconds(100) : std::chrono::seconds(5));
            co_await progress_tick.async_wait(asio::redirect_error(use_awaitable, ec));
            progress.draw(finished, failed, in_flight, now(), finished == n);
        }
    };

    if (n == 0) return result;
    asio::co_spawn(io, dispatch(), asio::detached);
    if (o.progress) asio::co_spawn(io, show_progress(), asio::detached);
    io.run();
    return result;
}

}  // namespace minfer::bench
