// minfer generate: offline batch inference over a JSONL file of completion
// requests, through the same engine the server uses.
#include <cxxopts.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>

#include "cli/cli_common.h"
#include "cli/parallel.h"
#include "cli/commands.h"
#include "cli/grammar_options.h"
#include "server/completion_json.h"
#include "engine/core/llm_engine.h"
#include "engine/model/model.h"
#include "engine/text/tokenizer.h"

namespace minfer::cli {

namespace {

namespace json = boost::json;

struct Job {
    json::value id;
    int line = 0;
    CompletionRequest request;
    std::vector<CompletionChoice> choices;
    std::vector<TokenLogprob> prompt_logprobs;
    bool done = false;
};

std::vector<Job> read_jobs(const std::string& path, const Tokenizer& tokenizer, bool json_compact) {
    std::ifstream in(path);
    if (!in) throw UsageError("cannot open --input " + path);
    std::vector<Job> jobs;
    std::string line;
    for (int line_no = 1; std::getline(in, line); ++line_no) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        const std::string where = fmt::format("{}:{}: ", path, line_no);
        boost::system::error_code ec;
        json::value v = json::parse(line, ec);
        if (ec) throw UsageError(where + "not JSON: " + ec.message());
        if (!v.is_object()) throw UsageError(where + "each line must be a JSON object");
        Job job;
        job.line = line_no;
        const json::object& o = v.as_object();
        job.id = o.contains("id") ? o.at("id") : json::value(jobs.size());
        try {
            job.request = parse_completion_request(o, tokenizer, json_compact);
            if (job.request.prompts.size() != 1) throw RequestError("one prompt per line");
        } catch (const RequestError& e) {
            throw UsageError(where + e.what());
        }
        jobs.push_back(std::move(job));
    }
    if (jobs.empty()) throw UsageError("--input " + path + " has no requests");
    return jobs;
}

json::object result_json(const Job& job, const Tokenizer& tokenizer) {
    const CompletionRequest& r = job.request;
    const std::vector<int32_t>& prompt_ids = r.prompts.front();
    const std::string prompt_text = r.options.echo ? tokenizer.decode(prompt_ids) : "";
    json::array choices;
    int64_t completion_tokens = 0;
    for (const CompletionChoice& c : job.choices) {
        json::object choice{{"index", c.index},
                            {"text", prompt_text + c.text},
                            {"token_ids", json::value_from(c.token_ids)},
                            {"finish_reason", c.finish_reason}};
        if (!c.stop_string.empty()) choice["stop_reason"] = c.stop_string;
        else if (c.stop_token >= 0) choice["stop_reason"] = c.stop_token;
        if (r.options.logprobs >= 0)
            choice["logprobs"] = completion_logprobs_json(tokenizer, c, r.options.echo ? &prompt_ids : nullptr,
                                                          job.prompt_logprobs);
        completion_tokens += int64_t(c.token_ids.size());
        choices.push_back(std::move(choice));
    }
    return {{"id", job.id},
            {"prompt_token_ids", json::value_from(prompt_ids)},
            {"choices", std::move(choices)},
            {"usage", {{"prompt_tokens", prompt_ids.size()}, {"completion_tokens", completion_tokens}}}};
}

void progress(size_t done, size_t total, int64_t tokens, double seconds) {
    constexpr int kWidth = 30;
    const int filled = int(kWidth * done / std::max<size_t>(total, 1));
    std::fprintf(stderr, "\r[%-*s] %zu/%zu requests, %.0f generated tok/s", kWidth,
                 std::string(size_t(filled), '=').c_str(), done, total, seconds > 0 ? tokens / seconds : 0.0);
    std::fflush(stderr);
}

}  // namespace

int cmd_generate(int argc, char** argv) {
    cxxopts::Options opts = command_options(
        "generate",
        "Offline batch inference: one OpenAI completion request per input line (an id, a prompt or\n"
        "prompt_token_ids, and max_tokens, temperature, top_p, top_k, min_p, seed, stop, n,\n"
        "logprobs, echo, logit_bias, ignore_eos, min_tokens, stop_token_ids, priority, user);\n"
        "one result per output line, in input order.",
        "[MODEL] --input requests.jsonl --output results.jsonl [options]");
    add_model_file_option(opts);
    // clang-format off
    opts.add_options()
        ("input", "requests, one JSON object per line", cxxopts::value<std::string>())
        ("output", "results, one JSON object per line ('-': standard output)", cxxopts::value<std::string>())
        ("trace", "write every step's plan as JSON lines to this file", cxxopts::value<std::string>());
    // clang-format on
    add_json_compact_option(opts);  // the default of structured_outputs.disable_any_whitespace
    add_synthetic_option(opts);
    add_engine_options(opts);
    add_parallel_options(opts);
    const cxxopts::ParseResult args =
        parse_command(opts, argc, argv, {"model"}, {"", "engine", "speculative decoding", "parallelism"});
    if (!args.count("input")) throw UsageError("--input is required");
    if (!args.count("output")) throw UsageError("--output is required");
    EngineConfig config = engine_config_from(args);

    ModelLaunch launch = launch_model(args, &config);
    if (launch.worker_exit) return *launch.worker_exit;  // ranks > 0 of mpirun end here
    const auto& backend = launch.backend;
    const auto& model = launch.model;
    auto tokenizer = Tokenizer::from_gguf(model->file());
    const auto draft_model = load_draft_model(config.speculative, *backend, *tokenizer);
    std::vector<Job> jobs = read_jobs(args["input"].as<std::string>(), *tokenizer, json_schema_options(args).compact);

    std::unique_ptr<LLMEngine> engine = make_engine(*model, *tokenizer, config, draft_model.get());
    std::ofstream trace;
    if (args.count("trace")) {
        trace.open(args["trace"].as<std::string>());
        if (!trace) throw UsageError("cannot write --trace " + args["trace"].as<std::string>());
        engine->set_trace(&trace);
    }
    std::ofstream out_file;
    const std::string out_path = args["output"].as<std::string>();
    if (out_path != "-") {
        out_file.open(out_path);
        if (!out_file) throw UsageError("cannot write --output " + out_path);
    }

    std::map<uint64_t, size_t> job_of;
    for (size_t i = 0; i < jobs.size(); ++i) {
        try {
            job_of[engine->add_request(jobs[i].request.prompts.front(), jobs[i].request.options)] = i;
        } catch (const RequestError& e) {
            throw UsageError(fmt::format("{}:{}: request {}: {}", args["input"].as<std::string>(), jobs[i].line,
                                         json::serialize(jobs[i].id), e.what()));
        }
    }

    const bool tty = isatty(STDERR_FILENO);
    const auto t0 = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    size_t finished = 0;
    double last_draw = -1;
    while (engine->has_unfinished()) {
        for (const RequestOutput& out : engine->step()) {
            Job& job = jobs[job_of.at(out.request_id)];
            accumulate(job.choices, job.prompt_logprobs, out);
            if (out.finished) {
                job.done = true;
                ++finished;
            }
        }
        if (tty && (elapsed() - last_draw > 0.1 || finished == jobs.size())) {
            last_draw = elapsed();
            progress(finished, jobs.size(), engine->stats().generation_tokens, last_draw);
        }
    }
    const double seconds = elapsed();
    if (tty) std::fputc('\n', stderr);

    std::FILE* out = out_path == "-" ? stdout : nullptr;
    for (const Job& job : jobs) {
        const std::string line = json::serialize(result_json(job, *tokenizer));
        if (out) std::fprintf(out, "%s\n", line.c_str());
        else out_file << line << '\n';
    }

    const EngineStats st = engine->stats();
    const double hit_rate = st.prefix_cache_queries ? double(st.prefix_cache_hits) / st.prefix_cache_queries : 0.0;
    std::fprintf(stderr,
                 "%zu requests in %.2f s: %.2f requests/s, %.1f generated tok/s, %.1f total tok/s | "
                 "prefix cache hit rate %.1f%% | %lld preemptions | %lld steps, %d KV blocks of %d tokens (%s)\n",
                 jobs.size(), seconds, jobs.size() / seconds, st.generation_tokens / seconds,
                 (st.generation_tokens + st.prompt_tokens) / seconds, 100 * hit_rate, (long long)st.num_preemptions,
                 (long long)st.steps, st.num_kv_blocks, engine->config().block_size,
                 kv_dtype_name(engine->config().kv_cache_dtype.value_or(KVDType::F32)));
    if (config.speculative.enabled()) print_spec_summary(st.spec_decode, config.speculative);
    if (st.parallel.ranks > 1) print_parallel_summary(st.parallel);
    if (backend->name() != "cpu") {
        const Backend::StepTraffic t = backend->traffic();
        std::fprintf(stderr, "device: %d CUDA graphs captured%s | %.0f B device-to-host per step\n", t.recordings,
                     engine->config().enforce_eager ? " (--enforce-eager)" : "",
                     t.steps ? double(t.device_to_host_bytes) / t.steps : 0.0);
    }
    return 0;
}

}  // namespace minfer::cli
