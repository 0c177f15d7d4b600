// minfer bench serve's pure parts: vLLM's metric definitions, numpy's
// percentiles, the arrival process, the SSE parser, the OpenAI chunk reader
// and the random dataset's exact token lengths.
#include <doctest/doctest.h>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "server/bench/arrivals.h"
#include "server/bench/dataset.h"
#include "server/bench/http_stream_client.h"
#include "server/bench/metrics.h"
#include "server/bench/openai_stream.h"
#include "server/bench/sse_parser.h"
#include "server/bench/svg_plot.h"
#include "engine/gguf/gguf.h"
#include "engine/text/tokenizer.h"

using namespace minfer;
using namespace minfer::bench;
using doctest::Approx;

TEST_CASE("bench percentile matches numpy's linear interpolation") {
    const std::vector<double> v = {10, 1, 4, 3, 2};  // unsorted on purpose
    CHECK(percentile(v, 50) == Approx(3.0));
    CHECK(percentile(v, 90) == Approx(7.6));
    CHECK(percentile(v, 99) == Approx(9.76));
    CHECK(percentile(v, 0) == 1.0);
    CHECK(percentile(v, 100) == 10.0);
    CHECK(percentile({}, 99) == 0.0);  // vLLM's np.percentile(x or 0, p)
    CHECK(percentile({5}, 99) == 5.0);
    // Values from numpy: mean, median, std (ddof=0), p90, p99 of w, in ms.
    const std::vector<double> w = {0.013, 0.002, 0.5, 0.021, 0.017, 0.0105, 0.3};
    const Stat s = stat_ms(w);
    CHECK(s.mean == Approx(123.35714285714285));
    CHECK(s.median == Approx(17.0));
    CHECK(s.std == Approx(183.0278500052684));
    CHECK(s.p90 == Approx(380.0));
    CHECK(s.p99 == Approx(488.0));
}

namespace {

RequestRecord ok(int32_t prompt, int32_t out, double start, double ttft, std::vector<double> itl) {
    RequestRecord r;
    r.success = true;
    r.prompt_len = prompt;
    r.output_tokens = out;
    r.start = start;
    r.ttft = ttft;
    r.itl = std::move(itl);
    r.latency = ttft + std::accumulate(r.itl.begin(), r.itl.end(), 0.0);
    r.end = start + r.latency;
    return r;
}

}  // namespace

TEST_CASE("bench summary follows vLLM's calculate_metrics") {
    std::vector<RequestRecord> rs;
    rs.push_back(ok(10, 5, 0.0, 0.1, {0.05, 0.05, 0.05, 0.05}));  // latency 0.3, TPOT 0.05
    rs.push_back(ok(20, 1, 1.2, 0.2, {}));                        // one token: no TPOT
    RequestRecord bad;
    bad.prompt_len = 99;
    bad.error = "HTTP 500: boom";
    rs.push_back(bad);

    const Summary m = summarize(rs, 2.0, Slo{});
    CHECK(m.completed == 2);
    CHECK(m.failed == 1);
    CHECK(m.total_input == 30);  // failed requests' prompts do not count
    CHECK(m.total_output == 6);
    CHECK(m.output_lens == std::vector<int32_t>{5, 1, 0});
    CHECK(m.request_throughput == Approx(1.0));
    CHECK(m.output_throughput == Approx(3.0));
    CHECK(m.total_token_throughput == Approx(18.0));
    CHECK(m.request_goodput == 0.0);
    CHECK(m.ttft.mean == Approx(150.0));
    CHECK(m.ttft.median == Approx(150.0));
    CHECK(m.ttft.std == Approx(50.0));
    CHECK(m.tpot.mean == Approx(50.0));  // only the request with > 1 token
    CHECK(m.tpots.size() == 1);
    CHECK(m.itl.mean == Approx(50.0));
    CHECK(m.e2el.mean == Approx(250.0));
    CHECK(m.e2el.p99 == Approx(300.0 - 0.01 * 100.0));
    // Peak: 5 chunks in second 0 (0.1 .. 0.3 s); the two requests never overlap.
    CHECK(m.max_output_tokens_per_s == 5.0);
    CHECK(m.max_concurrent_requests == 1);

    // Goodput: every SLO must hold; a one-token answer has TPOT 0.
    CHECK(summarize(rs, 2.0, parse_goodput("ttft:150")).request_goodput == Approx(0.5));
    CHECK(summarize(rs, 2.0, parse_goodput("tpot:10")).request_goodput == Approx(0.5));
    CHECK(summarize(rs, 2.0, parse_goodput("ttft:1000,tpot:51")).request_goodput == Approx(1.0));
    CHECK(summarize(rs, 2.0, parse_goodput("ttft:150 e2el:100")).request_goodput == 0.0);
}

TEST_CASE("bench timeline and in-flight steps") {
    std::vector<RequestRecord> rs = {ok(1, 3, 0.0, 0.5, {0.6, 0.6}), ok(1, 2, 0.2, 0.3, {1.0})};
    // Chunks at 0.5, 1.1, 1.7 and 0.5, 1.5: buckets 0:2, 1:3; the last ends at 1.7 -> 3 buckets.
    const Timeline t = timeline(rs);
    CHECK(t.tokens_per_s == std::vector<double>{2, 3, 0});
    CHECK(t.concurrency == std::vector<double>{2, 2, 0});
    const auto steps = in_flight_steps(rs, true);
    REQUIRE(steps.size() == 4);
    CHECK(steps[0] == std::pair<double, int32_t>{0.0, 1});
    CHECK(steps[1] == std::pair<double, int32_t>{0.2, 2});
    CHECK(steps[2].second == 1);
    CHECK(steps[3].second == 0);
    // Back to back ([0,1) then [1,2)) is not overlap.
    std::vector<RequestRecord> seq = {ok(1, 1, 0.0, 1.0, {}), ok(1, 1, 1.0, 1.0, {})};
    CHECK(summarize(seq, 2, Slo{}).max_concurrent_requests == 1);
}

TEST_CASE("bench --goodput parsing") {
    const Slo s = parse_goodput("ttft:200,tpot:50.5,e2el:3000");
    CHECK(*s.ttft_ms == 200.0);
    CHECK(*s.tpot_ms == 50.5);
    CHECK(*s.e2el_ms == 3000.0);
    CHECK_THROWS_AS(parse_goodput("ttft"), std::invalid_argument);
    CHECK_THROWS_AS(parse_goodput("latency:5"), std::invalid_argument);
    CHECK_THROWS_AS(parse_goodput("ttft:abc"), std::invalid_argument);
    CHECK_THROWS_AS(parse_goodput("ttft:-1"), std::invalid_argument);
    CHECK_THROWS_AS(parse_goodput(""), std::invalid_argument);
}

TEST_CASE("bench gamma arrivals have mean 1/rate and shape B") {
    for (double b : {0.5, 1.0, 4.0}) {
        const double rate = 4.0;
        const std::vector<double> g = gamma_gaps(200000, rate, b, 7);
        double mean = 0, var = 0;
        for (double x : g) mean += x;
        mean /= g.size();
        for (double x : g) var += (x - mean) * (x - mean);
        var /= g.size();
        CAPTURE(b);
        CHECK(mean == Approx(1.0 / rate).epsilon(0.01));
        // Gamma(k, theta): variance / mean^2 = 1/k.
        CHECK(var / (mean * mean) == Approx(1.0 / b).epsilon(0.03));
    }
    const std::vector<double> t = arrival_times(100, 10.0, 1.0, 3);
    CHECK(t.back() == Approx(10.0));  // rescaled so the last goes out at n/rate
    CHECK(std::is_sorted(t.begin(), t.end()));
    CHECK(t == arrival_times(100, 10.0, 1.0, 3));  // seeded
    CHECK(t != arrival_times(100, 10.0, 1.0, 4));
    for (double x : arrival_times(5, INFINITY, 1.0, 0)) CHECK(x == 0.0);
}

TEST_CASE("bench SSE parser gives the same events however the bytes are split") {
    const std::string stream =
        ": ping\r\n\r\n"
        "data: {\"choices\":[{\"text\":\"a\"}]}\r\n\r\n"
        "event: message\ndata: {\"choices\":[{\"text\":\"b\\n\"}]}\n\n"
        "data:{\"x\":1}\n"
        "data: {\"y\":2}\n\n"
        "data: [DONE]\n\n";
    const std::vector<std::string> want = {R"({"choices":[{"text":"a"}]})", R"({"choices":[{"text":"b\n"}]})",
                                           "{\"x\":1}\n{\"y\":2}", "[DONE]"};
    auto run = [&](const std::vector<size_t>& cuts) {
        SseParser p;
        std::vector<std::string> got;
        size_t from = 0;
        for (size_t c : cuts) {
            for (auto& e : p.feed(std::string_view(stream).substr(from, c - from))) got.push_back(e);
            from = c;
        }
        for (auto& e : p.feed(std::string_view(stream).substr(from))) got.push_back(e);
        for (auto& e : p.finish()) got.push_back(e);
        return got;
    };
    CHECK(run({}) == want);
    for (size_t a = 0; a <= stream.size(); a++)
        for (size_t b = a; b <= stream.size(); b += 7) {
            CAPTURE(a);
            CAPTURE(b);
            REQUIRE(run({a, b}) == want);
        }
    std::vector<size_t> every;
    for (size_t i = 1; i < stream.size(); i++) every.push_back(i);
    CHECK(run(every) == want);  // byte by byte

    SseParser p;  // an event cut off without its blank line still counts at the end
    CHECK(p.feed("data: {\"z\":3}").empty());
    CHECK(p.finish() == std::vector<std::string>{"{\"z\":3}"});
}

TEST_CASE("bench OpenAI stream reader: TTFT, ITL, text, usage, errors") {
    RequestRecord r;
    r.start = 1.0;
    OpenAIStream s(r, false);
    s.on_event(R"({"choices":[{"text":"Once","index":0}]})", 1.25);
    s.on_event(R"({"choices":[{"text":"","index":0}]})", 1.30);  // empty text still counts, as in vLLM
    s.on_event(R"({"choices":[{"text":" upon","index":0,"finish_reason":"length"}]})", 1.40);
    s.on_event(R"({"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}})", 1.5);
    s.on_event("[DONE]", 1.6);
    CHECK(s.done());
    CHECK(s.got_usage());
    CHECK(r.ttft == Approx(0.25));
    REQUIRE(r.itl.size() == 2);
    CHECK(r.itl[0] == Approx(0.05));
    CHECK(r.itl[1] == Approx(0.10));
    CHECK(s.last_chunk_time() == Approx(1.40));  // the usage chunk is no token
    CHECK(r.text == "Once upon");
    CHECK(r.output_tokens == 3);
    CHECK(r.prompt_len == 7);

    RequestRecord c;
    OpenAIStream chat(c, true);
    chat.on_event(R"({"choices":[{"delta":{"role":"assistant","content":"Hi"}}]})", 0.1);
    chat.on_event(R"({"choices":[{"delta":{"content":" there"},"finish_reason":null}]})", 0.2);
    CHECK(c.text == "Hi there");
    CHECK_FALSE(chat.got_usage());

    RequestRecord e;
    OpenAIStream err(e, false);
    CHECK_THROWS_WITH(err.on_event(R"({"error":{"message":"context too long","code":400}})", 0), "error in stream: context too long");
    CHECK_THROWS_WITH(err.on_event("{\"choices\": [", 0), "malformed stream: {\"choices\": [");

    const std::string body = request_body({"Hello", 1, 16}, "m", true, true);
    CHECK(body.find(R"("messages":[{"role":"user","content":"Hello"}])") != std::string::npos);
    CHECK(body.find(R"("max_completion_tokens":16)") != std::string::npos);
    CHECK(body.find(R"("stream_options":{"include_usage":true})") != std::string::npos);
    CHECK(body.find(R"("ignore_eos":true)") != std::string::npos);
    CHECK(request_body({"Hello", 1, 16}, "m", false, false).find(R"("prompt":"Hello")") != std::string::npos);
    // --extra-body's fields are added, and win over the client's own.
    const boost::json::object extra{{"temperature", 1.0}, {"response_format", {{"type", "json_object"}}}};
    const std::string with_extra = request_body({"Hello", 1, 16}, "m", false, false, extra);
    CHECK(with_extra.find(R"("temperature":1E0)") != std::string::npos);
    CHECK(with_extra.find(R"("temperature":0E0)") == std::string::npos);
    CHECK(with_extra.find(R"("response_format":{"type":"json_object"})") != std::string::npos);
}

TEST_CASE("bench random dataset gives prompts of exact token lengths") {
    const auto tok = Tokenizer::from_gguf(GGUFFile::open(std::string(MINFER_SOURCE_DIR) + "/models/stories260K.gguf"));
    for (int32_t len : {1, 2, 7, 32, 100, 256, 500}) {
        for (uint64_t seed : {0, 1, 2}) {
            const std::string text = text_of_token_len(*tok, len, seed);
            CAPTURE(len);
            CAPTURE(seed);
            CHECK(tok->encode(text, false).size() == static_cast<size_t>(len));
        }
    }
    const auto ps = random_prompts(*tok, 50, 64, 32, 0.5, 42);
    REQUIRE(ps.size() == 50);
    bool varied = false;
    for (const BenchPrompt& p : ps) {
        CHECK(p.prompt_len >= 32);
        CHECK(p.prompt_len <= 96);
        CHECK(p.output_len >= 16);
        CHECK(p.output_len <= 48);
        CHECK(tok->encode(p.prompt, false).size() == static_cast<size_t>(p.prompt_len));
        varied |= p.prompt_len != ps[0].prompt_len;
    }
    CHECK(varied);
    const auto again = random_prompts(*tok, 50, 64, 32, 0.5, 42);
    CHECK(again[7].prompt == ps[7].prompt);  // seeded
    for (const BenchPrompt& p : random_prompts(*tok, 10, 20, 5, 0.0, 1)) {
        CHECK(p.prompt_len == 20);
        CHECK(p.output_len == 5);
    }
}

TEST_CASE("bench URL parsing and plot helpers") {
    const Url u = parse_url("http://127.0.0.1:8000");
    CHECK(u.host == "127.0.0.1");
    CHECK(u.port == "8000");
    CHECK(u.path == "");
    const Url v = parse_url("http://example.com/proxy/");
    CHECK(v.port == "80");
    CHECK(v.path == "/proxy");
    CHECK(parse_url("http://[::1]:9000").host == "::1");
    CHECK_THROWS_AS(parse_url("https://x"), std::invalid_argument);
    CHECK_THROWS_AS(parse_url("localhost:8000"), std::invalid_argument);
    CHECK_THROWS_AS(parse_url("http://x:99999"), std::invalid_argument);

    CHECK(nice_ticks(0, 100, 5) == std::vector<double>{0, 20, 40, 60, 80, 100});
    CHECK(nice_ticks(0, 7.3, 5).back() >= 7.3);
    std::vector<RequestRecord> rs = {ok(1, 3, 0.0, 0.5, {0.6, 0.6})};
    const std::string svg = render_svg(rs, summarize(rs, 2, Slo{}), "model <x>", "settings");
    CHECK(svg.rfind("<svg", 0) == 0);
    CHECK(svg.find("</svg>") != std::string::npos);
    CHECK(svg.find("model &lt;x&gt;") != std::string::npos);
    CHECK(render_svg({}, summarize({}, 1, Slo{}), "t", "s").find("no data") != std::string::npos);
}
