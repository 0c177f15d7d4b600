// minfer bench latency: prefill and decode throughput of one model.
#include <cxxopts.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cstdio>
#include <fstream>
#include <random>

#include "engine/core/bench_latency.h"
#include "engine/core/bench_speculation.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/parallel.h"
#include "engine/model/model.h"

namespace minfer::cli {

namespace {

// bench latency with a proposer: the same greedy requests with and without it.
int bench_speculation_cmd(const cxxopts::ParseResult& args, const Model& model, const LatencyOptions& o,
                          const SpeculativeConfig& spec, const std::string& path) {
    if (o.output_len < 2) throw UsageError("--output-len must be at least 2 with speculation");
    if (args.count("prompt") && args.count("prompt-file")) throw UsageError("give --prompt or --prompt-file, not both");
    const auto tokenizer = Tokenizer::from_gguf(model.file());
    std::vector<int32_t> prompt;
    std::string source;
    if (args.count("prompt") || args.count("prompt-file")) {
        std::string text;
        if (args.count("prompt")) {
            text = args["prompt"].as<std::string>();
            source = "--prompt";
        } else {
            source = args["prompt-file"].as<std::string>();
            std::ifstream in(source, std::ios::binary);
            if (!in) throw UsageError("cannot read --prompt-file " + source);
            text.assign(std::istreambuf_iterator<char>(in), {});
        }
        prompt = tokenizer->encode(text, /*add_special=*/true);
    } else {
        std::mt19937_64 rng(o.seed);
        std::uniform_int_distribution<int32_t> token(0, model.config().vocab_size - 1);
        for (int32_t i = 0; i < o.input_len; ++i) prompt.push_back(token(rng));
        source = fmt::format("{} random ids", o.input_len);
    }
    if (prompt.empty()) throw UsageError("the prompt encodes to no tokens");
    if (int64_t(prompt.size()) + o.output_len > model.config().context_len)
        throw UsageError(fmt::format("the prompt ({} tokens) + --output-len {} exceed the model's context of {}",
                                     prompt.size(), o.output_len, model.config().context_len));
    const auto draft_model = load_draft_model(spec, model.backend(), *tokenizer);
    const SpeculationBenchResult r = bench_speculation(model, *tokenizer, o, prompt, spec, draft_model.get());
    const SpecDecodeStats& s = r.speculative.spec;
    if (args.count("json")) {
        boost::json::object j;
        j["model"] = path;
        j["backend"] = model.backend().name();
        j["method"] = speculative_method_name(spec.method);
        j["num_speculative_tokens"] = spec.num_speculative_tokens;
        j["batch"] = o.batch;
        j["prompt_len"] = prompt.size();
        j["output_len"] = o.output_len;
        j["repetitions"] = o.repetitions;
        j["plain_decode_tok_s"] = r.plain.decode_tok_s;
        j["spec_decode_tok_s"] = r.speculative.decode_tok_s;
        j["speedup"] = r.speedup;
        j["plain_steps"] = r.plain.steps;
        j["spec_steps"] = r.speculative.steps;
        j["acceptance_rate"] = s.acceptance_rate();
        j["mean_acceptance_length"] = s.mean_acceptance_length();
        j["num_drafts"] = s.num_drafts;
        j["num_draft_tokens"] = s.num_draft_tokens;
        j["num_accepted_tokens"] = s.num_accepted_tokens;
        j["same_tokens"] = r.same_tokens;
        j["tokens"] = r.tokens;
        std::printf("%s\n", boost::json::serialize(j).c_str());
        return 0;
    }
    std::printf("model    %s, %s backend; prompt: %s (%zu tokens); batch %d, %d tokens each, greedy\n", path.c_str(),
                model.backend().name().c_str(), source.c_str(), prompt.size(), o.batch, o.output_len);
    std::printf("decode   without speculation: %10.1f tok/s  (%lld steps a run)\n", r.plain.decode_tok_s,
                (long long)r.plain.steps);
    std::printf("decode   %s, k=%d:          %10.1f tok/s  (%lld steps a run): %.2fx\n", speculative_method_name(spec.method),
                spec.num_speculative_tokens, r.speculative.decode_tok_s, (long long)r.speculative.steps, r.speedup);
    std::printf("         acceptance rate %.1f%% (%lld of %lld draft tokens), mean acceptance length %.2f\n",
                100 * s.acceptance_rate(), (long long)s.num_accepted_tokens, (long long)s.num_draft_tokens,
                s.mean_acceptance_length());
    if (r.same_tokens == r.tokens)
        std::printf("(medians of %d runs after %d warm-up; the same tokens both ways)\n", o.repetitions, o.warmup);
    else
        std::printf("(medians of %d runs after %d warm-up; %lld of %lld tokens before the runs part: the GPU computes "
                    "verification rows in other kernels than decode rows)\n",
                    o.repetitions, o.warmup, (long long)r.same_tokens, (long long)r.tokens);
    return 0;
}

int bench_latency_cmd(int argc, char** argv) {
    cxxopts::Options opts = command_options(
        "bench latency", "Prefill and decode speed: medians of several runs after a warm-up, on random token ids.",
        "[MODEL] [options]");
    add_model_file_option(opts);
    // clang-format off
    opts.add_options()
        ("batch", "sequences decoded together", cxxopts::value<int32_t>()->default_value("1"))
        ("input-len", "prompt tokens per sequence", cxxopts::value<int32_t>()->default_value("128"))
        ("output-len", "tokens generated per sequence", cxxopts::value<int32_t>()->default_value("64"))
        ("repetitions", "measured runs", cxxopts::value<int32_t>()->default_value("5"))
        ("warmup", "unmeasured runs first", cxxopts::value<int32_t>()->default_value("1"))
        ("enforce-eager", "never record decode steps as CUDA graphs")
        ("profile-steps", "the device profiler collects only the first N decode steps of the last run "
                          "(for ncu --profile-from-start off)", cxxopts::value<int32_t>()->default_value("0"))
        ("profile-prefill", "the device profiler collects the prefill of the last run (for ncu --profile-from-start off)")
        ("prompt", "with speculation: the prompt text (default: --input-len random ids)", cxxopts::value<std::string>())
        ("prompt-file", "with speculation: the prompt, read from a file", cxxopts::value<std::string>())
        ("json", "print one JSON object");
    // clang-format on
    add_device_options(opts, true);
    add_model_run_options(opts);
    add_speculative_options(opts);
    add_parallel_options(opts);
    const cxxopts::ParseResult args = parse_command(opts, argc, argv, {"model"});
    LatencyOptions o;
    o.batch = int_option(args, "batch", 1, 4096);
    o.input_len = int_option(args, "input-len", 1);
    o.output_len = int_option(args, "output-len", 0);
    o.repetitions = int_option(args, "repetitions", 1);
    o.warmup = int_option(args, "warmup", 0);
    o.enforce_eager = args.count("enforce-eager") > 0;
    o.profile_steps = int_option(args, "profile-steps", 0, std::max(0, o.output_len - 1));  // the decode steps
    o.profile_prefill = args.count("profile-prefill") > 0;
    o.kv_dtype = kv_cache_dtype_from(args);
    const std::string path = args.count("synthetic") ? fmt::format("synthetic:{}", args["synthetic"].as<std::string>())
                                                     : args["model"].as<std::string>();
    ModelLaunch launch = launch_model(args, nullptr);
    if (launch.worker_exit) return *launch.worker_exit;  // ranks > 0 served rank 0's runners
    Backend* backend = launch.backend.get();
    Model* model = launch.model.get();
    const int32_t ranks = launch.parallel ? launch.parallel->world().size : 1;
    const ModelConfig& c = model->config();
    if (o.input_len + o.output_len > c.context_len)
        throw UsageError(fmt::format("--input-len + --output-len = {} exceeds the model's context of {}",
                                     o.input_len + o.output_len, c.context_len));
    const SpeculativeConfig spec = speculative_config_from(args);
    if (spec.enabled()) return bench_speculation_cmd(args, *model, o, spec, path);
    if (args.count("prompt") || args.count("prompt-file"))
        throw UsageError("--prompt and --prompt-file are for speculative decoding (--num-speculative-tokens K)");
    const LatencyResult r = bench_latency(*model, o);
    // Rooflines: decode reads its bytes at the copy bandwidth at best; prefill does its FLOPs at the GEMM rate.
    const bool fp8 = args.count("quantization") && args["quantization"].as<std::string>() == "fp8";
    HardwareLimits hw = hardware_limits(backend->name(), fp8);
    // Split over GPUs, each reads its share at its own bandwidth; CPU ranks share one machine's.
    if (backend->name() != "cpu") {
        hw.bytes_per_s *= ranks;
        hw.flop_per_s *= ranks;
    }
    const double decode_roofline_tok_s = hw.bytes_per_s > 0 && r.decode_bytes_per_step > 0
                                             ? o.batch * hw.bytes_per_s / r.decode_bytes_per_step : 0;
    const double prefill_roofline_tok_s =
        hw.flop_per_s > 0 && r.prefill_flops > 0 ? double(o.batch) * o.input_len * hw.flop_per_s / r.prefill_flops : 0;

    if (args.count("json")) {
        boost::json::object j;
        j["model"] = path;
        j["backend"] = backend->name();
        j["tensor_parallel_size"] = ranks;
        j["kv_cache_dtype"] = kv_dtype_name(r.kv_dtype);
        j["batch"] = o.batch;
        j["input_len"] = o.input_len;
        j["output_len"] = o.output_len;
        j["repetitions"] = o.repetitions;
        j["prefill_tok_s"] = r.prefill_tok_s;
        j["decode_tok_s"] = r.decode_tok_s;
        j["prefill_ms"] = r.prefill_seconds * 1e3;
        j["decode_step_ms"] = r.decode_step_ms;
        j["decode_gb_s"] = r.decode_gb_s;
        j["prefill_tflop_s"] = r.prefill_tflop_s;
        j["decode_bytes_per_step"] = r.decode_bytes_per_step;
        j["decode_roofline_tok_s"] = decode_roofline_tok_s;
        j["prefill_roofline_tok_s"] = prefill_roofline_tok_s;
        j["decode_d2h_bytes_per_step"] = r.decode_d2h_bytes_per_step;
        j["decode_h2d_bytes_per_step"] = r.decode_h2d_bytes_per_step;
        j["decode_idle_gap_us"] = r.decode_idle_gap_us;
        j["cuda_graphs"] = r.recordings;
        j["prefill_runs_s"] = boost::json::value_from(r.prefill_runs);
        j["decode_runs_s"] = boost::json::value_from(r.decode_runs);
        std::printf("%s\n", boost::json::serialize(j).c_str());
        return 0;
    }
    std::printf("model    %s (%s, %d layers, dim %d)\nbackend  %s, KV cache %s%s\n", path.c_str(), c.arch.c_str(),
                c.n_layers, c.dim, backend->name().c_str(), kv_dtype_name(r.kv_dtype),
                ranks > 1 ? fmt::format(", tensor parallel over {} ranks", ranks).c_str() : "");
    std::printf("prefill  batch %d x %d tokens: %10.1f tok/s  (%.2f ms, %.3f TFLOP/s)\n", o.batch, o.input_len,
                r.prefill_tok_s, r.prefill_seconds * 1e3, r.prefill_tflop_s);
    if (prefill_roofline_tok_s > 0)
        std::printf("         roofline %.0f tok/s at %.0f TFLOP/s: %.1f%% of it\n", prefill_roofline_tok_s,
                    hw.flop_per_s / 1e12, 100.0 * r.prefill_tok_s / prefill_roofline_tok_s);
    if (o.output_len > 1) {
        std::printf("decode   batch %d x %d steps:  %10.1f tok/s  (%.3f ms/step, %.1f GB/s of weights and KV)\n",
                    o.batch, o.output_len - 1, r.decode_tok_s, r.decode_step_ms, r.decode_gb_s);
        if (decode_roofline_tok_s > 0)
            std::printf("         roofline %.0f tok/s (%.2f GB a step at %.2f TB/s): %.1f%% of it\n",
                        decode_roofline_tok_s, r.decode_bytes_per_step / 1e9, hw.bytes_per_s / 1e12,
                        100.0 * r.decode_tok_s / decode_roofline_tok_s);
        if (backend->name() != "cpu")
            std::printf("         per step: %.0f B device-to-host, %.0f B host-to-device, device idle %.1f us "
                        "between steps (median); %d CUDA graphs%s\n",
                        r.decode_d2h_bytes_per_step, r.decode_h2d_bytes_per_step, r.decode_idle_gap_us, r.recordings,
                        o.enforce_eager ? " (--enforce-eager)" : "");
    }
    std::printf("(medians of %d runs after %d warm-up)\n", o.repetitions, o.warmup);
    return 0;
}

}  // namespace

int cmd_bench(int argc, char** argv) {
    if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
        std::printf("usage: minfer bench latency [MODEL] [options]   (minfer bench latency --help)\n"
                    "       minfer bench serve [options]            (minfer bench serve --help)\n"
                    "       mpirun -np N minfer bench collectives   (minfer bench collectives --help)\n");
        return argc < 2 ? 2 : 0;
    }
    const std::string what = argv[1];
    if (what == "latency") return bench_latency_cmd(argc - 1, argv + 1);
    if (what == "serve") return cmd_bench_serve(argc - 1, argv + 1);
    if (what == "collectives") return bench_collectives_cmd(argc - 1, argv + 1);
    throw UsageError("unknown benchmark '" + what + "' (try: latency, serve, collectives)");
}

}  // namespace minfer::cli
