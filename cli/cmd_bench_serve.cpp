// minfer bench serve: the load generator. Drives any OpenAI-compatible server
// (minfer serve, llama.cpp's llama-server, vLLM) and reports vLLM's serving
// metrics with vLLM's definitions, so its numbers compare with
// `vllm bench serve` directly.
#include <cxxopts.hpp>
#include <fmt/format.h>

#include <sys/resource.h>

#include <boost/json.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "server/bench/dataset.h"
#include "server/bench/http_stream_client.h"
#include "server/bench/metrics.h"
#include "server/bench/runner.h"
#include "server/bench/spec_metrics.h"
#include "server/bench/svg_plot.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "engine/gguf/gguf.h"
#include "engine/text/tokenizer.h"

namespace minfer::cli {

namespace {

using namespace minfer::bench;

double parse_rate(const std::string& s) {
    if (s == "inf") return INFINITY;
    try {
        size_t used = 0;
        const double r = std::stod(s, &used);
        if (used == s.size() && r > 0 && std::isfinite(r)) return r;
    } catch (const std::exception&) {
    }
    throw UsageError("--request-rate must be 'inf' or a number of requests per second > 0, got '" + s + "'");
}

// The first model the server lists, as vLLM's benchmark picks it: its id and
// its root (vLLM's and minfer's: the model's path on the server).
struct ListedModel {
    std::string id, root;
};
ListedModel first_model(const Url& url, const std::string& api_key) {
    const std::string where = fmt::format("http://{}:{}{}/v1/models", url.host, url.port, url.path);
    const HttpResult r = http_get(url, api_key, "/v1/models", std::chrono::seconds(30));
    if (r.status == 0) throw std::runtime_error(fmt::format("cannot list models at {}: {} (pass --model to skip this)", where, r.error));
    if (r.status != 200) throw std::runtime_error(fmt::format("GET {} answered HTTP {} (pass --model)", where, r.status));
    boost::system::error_code ec;
    const auto v = boost::json::parse(r.body, ec);
    const auto* data = !ec && v.is_object() ? v.as_object().if_contains("data") : nullptr;
    if (data && data->is_array() && !data->as_array().empty() && data->as_array()[0].is_object()) {
        const boost::json::object& m = data->as_array()[0].as_object();
        const auto* root = m.if_contains("root");
        if (const auto* id = m.if_contains("id"); id && id->is_string())
            return {std::string(id->as_string()), root && root->is_string() ? std::string(root->as_string()) : ""};
    }
    throw std::runtime_error("GET " + where + " listed no model (pass --model)");
}

// The server's speculative-decoding counters now, if its /metrics has them.
std::optional<SpecCounters> read_spec_counters(const Url& url, const std::string& api_key) {
    const HttpResult r = http_get(url, api_key, "/metrics", std::chrono::seconds(10));
    if (r.status != 200) return std::nullopt;
    return parse_spec_counters(r.body);
}

void print_table(const Summary& m, const RunOptions& o, bool goodput, const std::optional<SpecCounters>& spec) {
    auto row = [](const std::string& label, const std::string& value) {
        std::printf("%s\n", fmt::format("{:<40} {:<10}", label, value).c_str());
    };
    auto f2 = [](double v) { return fmt::format("{:.2f}", v); };
    auto header = [](const std::string& title, char fill) {
        const size_t pad = 50 - std::min<size_t>(50, title.size());
        std::printf("%s%s%s\n", std::string(pad / 2, fill).c_str(), title.c_str(), std::string(pad - pad / 2, fill).c_str());
    };
    header(" Serving Benchmark Result ", '=');
    row("Successful requests:", std::to_string(m.completed));
    row("Failed requests:", std::to_string(m.failed));
    if (o.max_concurrency > 0) row("Maximum request concurrency:", std::to_string(o.max_concurrency));
    if (std::isfinite(o.request_rate)) row("Request rate configured (RPS):", f2(o.request_rate));
    row("Benchmark duration (s):", f2(m.duration));
    row("Total input tokens:", std::to_string(m.total_input));
    row("Total generated tokens:", std::to_string(m.total_output));
    row("Request throughput (req/s):", f2(m.request_throughput));
    if (goodput) row("Request goodput (req/s):", f2(m.request_goodput));
    row("Output token throughput (tok/s):", f2(m.output_throughput));
    row("Peak output token throughput (tok/s):", f2(m.max_output_tokens_per_s));
    row("Peak concurrent requests:", f2(m.max_concurrent_requests));
    row("Total token throughput (tok/s):", f2(m.total_token_throughput));
    auto section = [&](const char* title, const char* name, const Stat& s) {
        header(title, '-');
        row(fmt::format("Mean {} (ms):", name), f2(s.mean));
        row(fmt::format("Median {} (ms):", name), f2(s.median));
        row(fmt::format("P90 {} (ms):", name), f2(s.p90));
        row(fmt::format("P99 {} (ms):", name), f2(s.p99));
    };
    section("Time to First Token", "TTFT", m.ttft);
    section("Time per Output Token (excl. 1st token)", "TPOT", m.tpot);
    section("Inter-token Latency", "ITL", m.itl);
    section("End-to-end Latency", "E2EL", m.e2el);
    if (spec) {
        header("Speculative Decoding", '-');
        row("Acceptance rate (%):", f2(100 * spec->acceptance_rate()));
        row("Acceptance length:", f2(spec->acceptance_length()));
        row("Drafts:", fmt::format("{:.0f}", spec->drafts));
        row("Draft tokens:", fmt::format("{:.0f}", spec->draft_tokens));
        row("Accepted tokens:", fmt::format("{:.0f}", spec->accepted));
        std::string per_pos;
        for (double a : spec->accepted_per_pos)
            per_pos += fmt::format("{}{:.2f}", per_pos.empty() ? "" : " ", spec->drafts > 0 ? a / spec->drafts : 0.0);
        row("Per-position acceptance rate:", per_pos.empty() ? "-" : per_pos);
    }
    header("", '=');
    std::fflush(stdout);
}

// vLLM's result file: its key names, its per-request arrays, the run's settings.
boost::json::object result_json(const Summary& m, const RunResult& run, const RunOptions& o, const std::string& dataset,
                                size_t num_prompts, bool goodput, const std::optional<SpecCounters>& spec) {
    namespace json = boost::json;
    json::object j;
    if (spec) {
        j["spec_decode_acceptance_rate"] = 100 * spec->acceptance_rate();
        j["spec_decode_acceptance_length"] = spec->acceptance_length();
        j["spec_decode_num_drafts"] = spec->drafts;
        j["spec_decode_draft_tokens"] = spec->draft_tokens;
        j["spec_decode_accepted_tokens"] = spec->accepted;
        j["spec_decode_per_position_acceptance_rate"] = json::value_from(spec->accepted_per_pos);
        for (auto& a : j["spec_decode_per_position_acceptance_rate"].as_array())
            a = spec->drafts > 0 ? a.to_number<double>() / spec->drafts : 0.0;
    }
    char date[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof date, "%Y%m%d-%H%M%S", std::localtime(&now));
    j["date"] = date;
    j["backend"] = o.chat ? "openai-chat" : "openai";
    j["endpoint"] = o.endpoint;
    j["model_id"] = o.model;
    j["dataset"] = dataset;
    if (!o.extra_body.empty()) j["extra_body"] = o.extra_body;
    j["num_prompts"] = num_prompts;
    if (std::isfinite(o.request_rate)) j["request_rate"] = o.request_rate;
    else j["request_rate"] = "inf";
    j["burstiness"] = o.burstiness;
    if (o.max_concurrency > 0) j["max_concurrency"] = o.max_concurrency;
    else j["max_concurrency"] = nullptr;
    j["duration"] = m.duration;
    j["completed"] = m.completed;
    j["failed"] = m.failed;
    j["total_input_tokens"] = m.total_input;
    j["total_output_tokens"] = m.total_output;
    j["request_throughput"] = m.request_throughput;
    if (goodput) j["request_goodput"] = m.request_goodput;
    else j["request_goodput"] = nullptr;
    j["output_throughput"] = m.output_throughput;
    j["total_token_throughput"] = m.total_token_throughput;
    j["max_output_tokens_per_s"] = m.max_output_tokens_per_s;
    j["max_concurrent_requests"] = m.max_concurrent_requests;
    auto put = [&](const char* name, const Stat& s) {
        j[fmt::format("mean_{}_ms", name)] = s.mean;
        j[fmt::format("median_{}_ms", name)] = s.median;
        j[fmt::format("std_{}_ms", name)] = s.std;
        j[fmt::format("p90_{}_ms", name)] = s.p90;
        j[fmt::format("p99_{}_ms", name)] = s.p99;
    };
    put("ttft", m.ttft);
    put("tpot", m.tpot);
    put("itl", m.itl);
    put("e2el", m.e2el);
    json::array input_lens, ttfts, itls, latencies, start_times, texts, errors;
    for (const RequestRecord& r : run.records) {
        input_lens.push_back(r.prompt_len);
        ttfts.push_back(r.ttft);
        itls.push_back(json::value_from(r.itl));
        latencies.push_back(r.latency);
        start_times.push_back(r.start);
        texts.push_back(json::string(r.text));
        errors.push_back(json::string(r.error));
    }
    j["input_lens"] = std::move(input_lens);
    j["output_lens"] = json::value_from(m.output_lens);
    j["ttfts"] = std::move(ttfts);
    j["itls"] = std::move(itls);
    j["latencies"] = std::move(latencies);
    j["start_times"] = std::move(start_times);
    j["generated_texts"] = std::move(texts);
    j["errors"] = std::move(errors);
    return j;
}

// One socket per request in flight: thousands of them need more than the
// usual soft limit of 1024 open files, so take what the hard limit allows.
void raise_open_file_limit() {
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
        lim.rlim_cur = lim.rlim_max;
        setrlimit(RLIMIT_NOFILE, &lim);
    }
}

void write_file(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
    if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int cmd_bench_serve(int argc, char** argv) {
    cxxopts::Options opts = command_options("bench serve",
                                            "Load-test an OpenAI-compatible server (minfer serve, llama-server, "
                                            "vLLM) and report vLLM's serving metrics (TTFT, TPOT, ITL, E2EL, "
                                            "throughput, goodput).",
                                            "[options]");
    // clang-format off
    opts.add_options()
        ("base-url", "the server", cxxopts::value<std::string>()->default_value("http://127.0.0.1:8000"))
        ("endpoint", "/v1/completions or /v1/chat/completions", cxxopts::value<std::string>()->default_value("/v1/completions"))
        ("model", "model name to send (default: the first id of GET /v1/models)", cxxopts::value<std::string>())
        ("api-key", "sent as Authorization: Bearer (default: $OPENAI_API_KEY)", cxxopts::value<std::string>())
        ("dataset", "random, sharegpt:FILE (ShareGPT JSON) or jsonl:FILE (lines of {prompt, max_tokens})",
            cxxopts::value<std::string>()->default_value("random"))
        ("num-prompts", "requests to send", cxxopts::value<int64_t>()->default_value("200"))
        ("random-input-len", "prompt tokens (random dataset)", cxxopts::value<int32_t>()->default_value("256"))
        ("random-output-len", "max_tokens (random dataset; jsonl lines without max_tokens)",
            cxxopts::value<int32_t>()->default_value("128"))
        ("random-range-ratio", "lengths drawn from [len*(1-R), len*(1+R)]", cxxopts::value<double>()->default_value("0"))
        ("ignore-eos", "ask the server to generate all max_tokens (vLLM / llama.cpp extension)")
        ("extra-body", "a JSON object whose fields every request body gets, e.g. "
                       "'{\"response_format\": {\"type\": \"json_object\"}}'", cxxopts::value<std::string>())
        ("tokenizer", "GGUF file whose tokenizer makes the prompts and counts tokens the server does not report "
                      "(default: the served model's file, the root GET /v1/models gives, when it is a GGUF here)",
            cxxopts::value<std::string>())
        ("request-rate", "requests per second, or inf to send all at once", cxxopts::value<std::string>()->default_value("inf"))
        ("burstiness", "shape of the gamma-distributed gaps between requests (1 = Poisson)",
            cxxopts::value<double>()->default_value("1"))
        ("max-concurrency", "at most this many requests in flight", cxxopts::value<int32_t>())
        ("goodput", "SLOs in ms for goodput, e.g. ttft:200,tpot:50,e2el:5000", cxxopts::value<std::string>())
        ("seed", "seed of the prompts and arrival times", cxxopts::value<uint64_t>()->default_value("0"))
        ("timeout", "seconds a request may take", cxxopts::value<double>()->default_value("600"))
        ("result-json", "write the results (vLLM's keys) to FILE", cxxopts::value<std::string>())
        ("plot", "draw TTFT, TPOT and throughput over time as an SVG image to FILE (.svg is added if FILE lacks it)",
            cxxopts::value<std::string>())
        ("disable-progress", "no progress bar on stderr");
    // clang-format on
    const cxxopts::ParseResult args = parse_command(opts, argc, argv);
    RunOptions o;
    try {
        o.url = parse_url(args["base-url"].as<std::string>());
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--base-url: ") + e.what());
    }
    o.endpoint = args["endpoint"].as<std::string>();
    if (o.endpoint.empty() || o.endpoint[0] != '/') throw UsageError("--endpoint must start with '/', e.g. /v1/completions");
    o.chat = o.endpoint.ends_with("chat/completions");
    if (args.count("api-key")) o.api_key = args["api-key"].as<std::string>();
    else if (const char* k = std::getenv("OPENAI_API_KEY")) o.api_key = k;
    o.ignore_eos = args.count("ignore-eos") > 0;
    if (args.count("extra-body")) {
        boost::system::error_code ec;
        const boost::json::value extra = boost::json::parse(args["extra-body"].as<std::string>(), ec);
        if (ec || !extra.is_object()) throw UsageError("--extra-body must be a JSON object, e.g. '{\"temperature\": 1}'");
        o.extra_body = extra.as_object();
    }
    o.request_rate = parse_rate(args["request-rate"].as<std::string>());
    o.burstiness = args["burstiness"].as<double>();
    if (!(o.burstiness > 0)) throw UsageError("--burstiness must be > 0");
    if (args.count("max-concurrency")) o.max_concurrency = int_option(args, "max-concurrency", 1);
    o.seed = args["seed"].as<uint64_t>();
    o.timeout_s = args["timeout"].as<double>();
    if (!(o.timeout_s > 0)) throw UsageError("--timeout must be > 0 seconds");
    o.progress = args.count("disable-progress") == 0;
    const int64_t num_prompts = args["num-prompts"].as<int64_t>();
    if (num_prompts <= 0 || num_prompts > 10'000'000) throw UsageError("--num-prompts must be in 1..10000000");
    const int32_t in_len = int_option(args, "random-input-len", 1);
    const int32_t out_len = int_option(args, "random-output-len", 1);
    const double range_ratio = args["random-range-ratio"].as<double>();
    if (!(range_ratio >= 0 && range_ratio < 1)) throw UsageError("--random-range-ratio must be in [0, 1)");
    Slo slo;
    if (args.count("goodput")) {
        try {
            slo = parse_goodput(args["goodput"].as<std::string>());
        } catch (const std::invalid_argument& e) {
            throw UsageError(e.what());
        }
    }
    const std::string dataset = args["dataset"].as<std::string>();
    std::string kind = dataset, file;
    if (const size_t colon = dataset.find(':'); colon != std::string::npos) {
        kind = dataset.substr(0, colon);
        file = dataset.substr(colon + 1);
    }
    if (!((kind == "random" && file.empty()) || ((kind == "sharegpt" || kind == "jsonl") && !file.empty())))
        throw UsageError("--dataset must be random, sharegpt:FILE or jsonl:FILE, got '" + dataset + "'");

    // The served model's file is the default tokenizer (the root GET /v1/models
    // gives, when it is a GGUF file on this machine); else the bundled model's.
    std::optional<ListedModel> listed;
    if (!args.count("model") || !args.count("tokenizer")) {
        try {
            listed = first_model(o.url, o.api_key);
        } catch (const std::exception&) {
            if (!args.count("model")) throw;  // the model name is needed
        }
    }
    o.model = args.count("model") ? args["model"].as<std::string>() : listed->id;
    std::string tokenizer_file = args.count("tokenizer") ? args["tokenizer"].as<std::string>() : "";
    bool guessed_tokenizer = false;
    if (tokenizer_file.empty()) {
        std::error_code ec;
        if (listed && listed->root.ends_with(".gguf") && std::filesystem::is_regular_file(listed->root, ec)) {
            tokenizer_file = listed->root;
        } else {
            tokenizer_file = default_model_path();
            guessed_tokenizer = true;
        }
    }
    const auto tok = Tokenizer::from_gguf(GGUFFile::open(tokenizer_file));
    const size_t n = static_cast<size_t>(num_prompts);
    std::vector<BenchPrompt> prompts;
    if (kind == "random") prompts = random_prompts(*tok, n, in_len, out_len, range_ratio, o.seed);
    else if (kind == "sharegpt") prompts = sharegpt_prompts(*tok, file, n, o.seed);
    else prompts = jsonl_prompts(*tok, file, n, out_len);
    if (prompts.size() < n)
        std::fprintf(stderr, "note: %s has %zu usable prompts; sending those\n", dataset.c_str(), prompts.size());
    if (guessed_tokenizer)
        std::fprintf(stderr, "note: the server's model file is not known here; tokens counted with %s "
                             "(--tokenizer FILE.gguf sets the right one)\n", tokenizer_file.c_str());

    const std::string base = fmt::format("http://{}:{}{}", o.url.host, o.url.port, o.url.path);
    std::fprintf(stderr, "bench serve: %zu prompts (%s) to %s%s, model %s; request rate %s, burstiness %g (%s), max concurrency %s\n",
                 prompts.size(), dataset.c_str(), base.c_str(), o.endpoint.c_str(), o.model.c_str(),
                 args["request-rate"].as<std::string>().c_str(), o.burstiness,
                 o.burstiness == 1 ? "Poisson process" : "gamma distribution",
                 o.max_concurrency > 0 ? std::to_string(o.max_concurrency).c_str() : "none");

    raise_open_file_limit();
    const std::optional<SpecCounters> spec_before = read_spec_counters(o.url, o.api_key);
    const RunResult run = run_benchmark(o, prompts, *tok);
    const Summary m = summarize(run.records, run.duration, slo);
    std::optional<SpecCounters> spec = read_spec_counters(o.url, o.api_key);
    if (spec && spec_before) spec = spec_difference(*spec, *spec_before);

    // The first few distinct errors, with how often each came.
    std::vector<std::pair<std::string, int>> errors;
    for (const RequestRecord& r : run.records) {
        if (r.success) continue;
        auto it = std::find_if(errors.begin(), errors.end(), [&](const auto& e) { return e.first == r.error; });
        if (it != errors.end()) it->second++;
        else errors.emplace_back(r.error, 1);
    }
    if (!errors.empty()) {
        std::fprintf(stderr, "failed requests: %d; the errors:\n", m.failed);
        for (size_t i = 0; i < errors.size() && i < 5; i++)
            std::fprintf(stderr, "  %d x %s\n", errors[i].second, errors[i].first.c_str());
        if (errors.size() > 5) std::fprintf(stderr, "  ... and %zu other messages\n", errors.size() - 5);
    }
    print_table(m, o, !slo.empty(), spec);

    if (args.count("result-json"))
        write_file(args["result-json"].as<std::string>(),
                   boost::json::serialize(result_json(m, run, o, dataset, prompts.size(), !slo.empty(), spec)) + "\n");
    if (args.count("plot")) {
        const std::string title = fmt::format("{} — {}{}", o.model, base, o.endpoint);
        const std::string subtitle = fmt::format(
            "{} prompts ({}) · request rate {} · burstiness {:g} · max concurrency {}", prompts.size(), dataset,
            args["request-rate"].as<std::string>(), o.burstiness,
            o.max_concurrency > 0 ? std::to_string(o.max_concurrency) : std::string("none"));
        std::string plot = args["plot"].as<std::string>();
        if (!plot.ends_with(".svg")) plot += ".svg";
        write_file(plot, render_svg(run.records, m, title, subtitle));
    }
    if (m.completed == 0) {
        std::fprintf(stderr, "minfer bench serve: every request failed\n");
        return 1;
    }
    return 0;
}

}  // namespace minfer::cli
