#include "cli/cli_common.h"

#include <fmt/format.h>

#include <cstdio>

#include <filesystem>
#include <system_error>

#include "cli/commands.h"
#include "engine/gguf/model_source.h"

namespace minfer::cli {

cxxopts::Options command_options(const std::string& name, const std::string& description, const std::string& usage) {
    cxxopts::Options opts("minfer " + name, description);
    if (!usage.empty()) {
        opts.custom_help(usage);
        opts.positional_help("");
    }
    opts.add_options()("h,help", "show this help");
    return opts;
}

void add_model_file_option(cxxopts::Options& opts, const std::string& name, const std::string& help) {
    opts.add_options()(name, help, cxxopts::value<std::string>()->default_value(default_model_path()));
}

int32_t int_option(const cxxopts::ParseResult& args, const std::string& name, int32_t lo, int32_t hi) {
    const int32_t value = args[name].as<int32_t>();
    if (value < lo || value > hi)
        throw UsageError(hi == std::numeric_limits<int32_t>::max() ? fmt::format("--{} must be >= {}", name, lo)
                                                                    : fmt::format("--{} must be in {}..{}", name, lo, hi));
    return value;
}

cxxopts::ParseResult parse_command(cxxopts::Options& opts, int argc, char** argv,
                                   const std::vector<std::string>& positional,
                                   const std::vector<std::string>& help_groups) {
    if (!positional.empty()) opts.parse_positional(positional);
    cxxopts::ParseResult args;
    try {
        args = opts.parse(argc, argv);
    } catch (const cxxopts::exceptions::exception& e) {
        throw UsageError(e.what());
    }
    if (args.count("help")) {
        std::printf("%s\n", opts.help(help_groups).c_str());
        throw HelpPrinted{};
    }
    if (!args.unmatched().empty()) throw UsageError("unexpected argument '" + args.unmatched().front() + "'");
    return args;
}

void add_synthetic_option(cxxopts::Options& opts) {
    opts.add_options()("synthetic", "use a random-weight model built in memory instead of a file: PRESET[:DTYPE] "
                                    "(see minfer synth --list)", cxxopts::value<std::string>());
}

void add_model_run_options(cxxopts::Options& opts) {
    add_synthetic_option(opts);
    add_quantization_option(opts);
    add_kv_cache_dtype_option(opts);
}

GGUFFile open_model_arg(const cxxopts::ParseResult& args, const std::string& file_option, bool weights) {
    const std::string spec = args.count("synthetic") ? args["synthetic"].as<std::string>() : "";
    if (!spec.empty() && args.count(file_option)) throw UsageError("give a model file or --synthetic, not both");
    if (args.count("synthetic") && spec.empty()) throw UsageError("--synthetic needs PRESET[:DTYPE]");
    try {
        return open_model_source(args[file_option].as<std::string>(), spec, weights);
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--synthetic: ") + e.what());
    }
}

void add_engine_options(cxxopts::Options& opts) {
    // clang-format off
    opts.add_options("engine")
        ("max-num-seqs", "sequences in one step", cxxopts::value<int32_t>()->default_value("256"))
        ("max-num-batched-tokens", "token rows in one step (prefill chunks and decodes)",
         cxxopts::value<int32_t>()->default_value("2048"))
        ("max-model-len", "context length cap (default: the model's)", cxxopts::value<int32_t>()->default_value("0"))
        ("block-size", "tokens per KV block", cxxopts::value<int32_t>()->default_value("16"))
        ("num-kv-blocks", "force the KV pool to this many blocks", cxxopts::value<int32_t>()->default_value("0"))
        ("kv-cache-memory", "bytes for the KV pool, e.g. 2G (default: on the CPU a quarter of free memory, "
         "on a GPU what --gpu-memory-utilization leaves)", cxxopts::value<std::string>())
        ("gpu-memory-utilization", "fraction of the GPU's memory for the model, activations and KV cache",
         cxxopts::value<double>()->default_value("0.9"))
        ("enforce-eager", "never record decode steps as CUDA graphs")
        ("no-prefix-caching", "do not reuse the KV blocks of shared prompt prefixes")
        ("scheduling-policy", "fcfs, priority (lower first) or fair (per user)",
         cxxopts::value<std::string>()->default_value("fcfs"))
        ("max-step-ms", "a step's target time: its token budget shrinks to fit, from the steps timed so far "
         "(auto: 100 on the CPU, none on a GPU; 0: none)", cxxopts::value<std::string>()->default_value("auto"));
    // clang-format on
    add_device_options(opts, true, "engine");
    add_quantization_option(opts);
    add_kv_cache_dtype_option(opts);
    add_speculative_options(opts);
}

// Speculation off by default; --num-speculative-tokens with no method means n-gram lookup.
void add_speculative_options(cxxopts::Options& opts) {
    // clang-format off
    opts.add_options("speculative decoding")
        ("speculative-method", "ngram (prompt lookup) or draft (a draft model, --speculative-model)",
         cxxopts::value<std::string>())
        ("num-speculative-tokens", "tokens proposed per sequence and step (k)", cxxopts::value<int32_t>())
        ("speculative-model", "the draft model's GGUF (same vocabulary as the target)", cxxopts::value<std::string>())
        ("prompt-lookup-min", "ngram: the shortest n-gram matched", cxxopts::value<int32_t>())
        ("prompt-lookup-max", "ngram: the longest n-gram matched", cxxopts::value<int32_t>())
        ("speculative-disable-by-batch-size", "no speculation in a step with more running sequences than this "
         "(0: always speculate)", cxxopts::value<int32_t>())
        ("speculative-config", "vLLM's JSON form, e.g. '{\"method\": \"ngram\", \"num_speculative_tokens\": 4}'",
         cxxopts::value<std::string>());
    // clang-format on
}

SpeculativeConfig speculative_config_from(const cxxopts::ParseResult& args) {
    SpeculativeConfig c;
    try {
        if (args.count("speculative-config")) c = parse_speculative_config(args["speculative-config"].as<std::string>());
        if (args.count("speculative-method")) c.method = parse_speculative_method(args["speculative-method"].as<std::string>());
        if (args.count("num-speculative-tokens")) c.num_speculative_tokens = args["num-speculative-tokens"].as<int32_t>();
        if (args.count("speculative-model")) c.model = args["speculative-model"].as<std::string>();
        if (args.count("prompt-lookup-min")) c.prompt_lookup_min = args["prompt-lookup-min"].as<int32_t>();
        if (args.count("prompt-lookup-max")) c.prompt_lookup_max = args["prompt-lookup-max"].as<int32_t>();
        if (args.count("speculative-disable-by-batch-size"))
            c.disable_by_batch_size = args["speculative-disable-by-batch-size"].as<int32_t>();
        if (c.method == SpeculativeMethod::None && (args.count("num-speculative-tokens") || !c.model.empty()))
            c.method = c.model.empty() ? SpeculativeMethod::Ngram : SpeculativeMethod::Draft;
        if (c.method != SpeculativeMethod::None && !args.count("num-speculative-tokens") &&
            !args.count("speculative-config"))
            throw std::invalid_argument("--speculative-method needs --num-speculative-tokens K");
        // Only --prompt-lookup-min given: the longest is at least it.
        if (args.count("prompt-lookup-min") && !args.count("prompt-lookup-max") && !args.count("speculative-config"))
            c.prompt_lookup_max = std::max(c.prompt_lookup_max, c.prompt_lookup_min);
        c.validate();
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
    return c;
}

void add_device_options(cxxopts::Options& opts, bool threads, const std::string& group) {
    opts.add_options(group)("device", "cpu, cuda, or auto (cuda when a GPU is present)",
                            cxxopts::value<std::string>()->default_value("auto"));
    if (threads)
        opts.add_options(group)("threads", "CPU threads (0 = one per core)", cxxopts::value<int32_t>()->default_value("0"));
}

void add_kv_cache_dtype_option(cxxopts::Options& opts) {
    opts.add_options("engine")("kv-cache-dtype",
                               "auto (the backend's choice: bfloat16 on cuda, float32 on the CPU), float32 or "
                               "bfloat16 (half the memory a token takes; keys and values rounded to bf16)",
                               cxxopts::value<std::string>()->default_value("auto"));
}

std::optional<KVDType> kv_cache_dtype_from(const cxxopts::ParseResult& args) {
    const std::string name = args.count("kv-cache-dtype") ? args["kv-cache-dtype"].as<std::string>() : "auto";
    if (name == "auto") return std::nullopt;
    if (name == "float32" || name == "fp32" || name == "f32") return KVDType::F32;
    if (name == "bfloat16" || name == "bf16") return KVDType::BF16;
    throw UsageError("--kv-cache-dtype must be auto, float32 or bfloat16, got '" + name + "'");
}

void add_quantization_option(cxxopts::Options& opts) {
    opts.add_options("engine")("quantization",
                               "none, or fp8: the layers' dense weights converted to FP8 E4M3 at load (per-tensor "
                               "scale; CUDA only)",
                               cxxopts::value<std::string>()->default_value("none"));
}

size_t parse_bytes(const std::string& text, const std::string& flag) {
    size_t end = 0;
    double value = 0;
    try {
        value = std::stod(text, &end);
    } catch (const std::exception&) {
        throw UsageError(flag + " takes a size such as 4G or 512M, got '" + text + "'");
    }
    const std::string unit = text.substr(end);
    double scale = 1;
    if (unit == "K" || unit == "KiB" || unit == "k") scale = 1024.0;
    else if (unit == "M" || unit == "MiB") scale = 1024.0 * 1024;
    else if (unit == "G" || unit == "GiB") scale = 1024.0 * 1024 * 1024;
    else if (unit == "T" || unit == "TiB") scale = 1024.0 * 1024 * 1024 * 1024;
    else if (!unit.empty()) throw UsageError(flag + ": unknown unit '" + unit + "' (K, M, G or T)");
    if (!(value > 0) || value * scale > 1e15) throw UsageError(flag + " must be a positive size");
    return static_cast<size_t>(value * scale);
}

void print_spec_summary(const SpecDecodeStats& s, const SpeculativeConfig& c) {
    std::string per_pos;
    for (size_t i = 0; i < s.accepted_per_pos.size(); ++i)
        per_pos += fmt::format("{}{:.2f}", i ? " " : "", s.num_drafts ? double(s.accepted_per_pos[i]) / s.num_drafts : 0.0);
    std::fprintf(stderr,
                 "speculative decoding (%s, k=%d): %lld drafts, %lld draft tokens, %lld accepted | acceptance rate "
                 "%.1f%% | mean acceptance length %.2f | accepted per position: %s\n",
                 speculative_method_name(c.method), c.num_speculative_tokens, (long long)s.num_drafts,
                 (long long)s.num_draft_tokens, (long long)s.num_accepted_tokens, 100 * s.acceptance_rate(),
                 s.mean_acceptance_length(), per_pos.empty() ? "-" : per_pos.c_str());
}

EngineConfig engine_config_from(const cxxopts::ParseResult& args) {
    EngineConfig c;
    c.max_num_seqs = int_option(args, "max-num-seqs", 1, 65536);
    c.max_num_batched_tokens = int_option(args, "max-num-batched-tokens", 1, 1 << 20);
    c.max_model_len = int_option(args, "max-model-len", 0);
    c.block_size = int_option(args, "block-size", 1, 1024);
    c.num_kv_blocks = int_option(args, "num-kv-blocks", 0);
    if (args.count("kv-cache-memory")) c.kv_cache_memory = parse_bytes(args["kv-cache-memory"].as<std::string>(), "--kv-cache-memory");
    c.gpu_memory_utilization = args["gpu-memory-utilization"].as<double>();
    if (!(c.gpu_memory_utilization > 0 && c.gpu_memory_utilization <= 1))
        throw UsageError("--gpu-memory-utilization must be in (0, 1]");
    c.enforce_eager = args.count("enforce-eager") > 0;
    c.kv_cache_dtype = kv_cache_dtype_from(args);
    if (const std::string ms = args["max-step-ms"].as<std::string>(); ms != "auto") {
        size_t end = 0;
        double value = -1;
        try {
            value = std::stod(ms, &end);
        } catch (const std::exception&) {
        }
        if (end != ms.size() || !(value >= 0 && value <= 3.6e6))
            throw UsageError("--max-step-ms must be auto or a number of milliseconds >= 0, got '" + ms + "'");
        c.max_step_seconds = value / 1000;
    }
    c.enable_prefix_caching = args.count("no-prefix-caching") == 0;
    c.speculative = speculative_config_from(args);
    try {
        c.policy = parse_scheduling_policy(args["scheduling-policy"].as<std::string>());
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--scheduling-policy: ") + e.what());
    }
    return c;
}

std::unique_ptr<Backend> backend_from(const cxxopts::ParseResult& args, const World& world) {
    const std::string device = args["device"].as<std::string>();
    if (device != "cpu" && device != "cuda" && device != "auto")
        throw UsageError("--device must be cpu, cuda or auto, got '" + device + "'");
    const int32_t threads = args.count("threads") ? int_option(args, "threads", 0) : 0;
    BackendOptions options;
    options.world = world;
    const std::string quant = args.count("quantization") ? args["quantization"].as<std::string>() : "none";
    if (quant == "fp8")
        options.quantization = WeightQuantization::FP8;
    else if (quant != "none")
        throw UsageError("--quantization must be none or fp8, got '" + quant + "'");
    if (options.quantization == WeightQuantization::None) return make_backend(device, threads, options);
    try {
        return make_backend(device, threads, options);
    } catch (const std::invalid_argument& e) {  // fp8 on the CPU: a usage error
        throw UsageError(e.what());
    }
}

const char* default_model_path() {
    // The bundled model, found next to the binary's build folder (build/minfer
    // -> models/) or under the working directory.
    static const std::string path = [] {
        namespace fs = std::filesystem;
        std::error_code ec;
        const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
        if (!ec) {
            const fs::path p = exe.parent_path().parent_path() / "models" / "stories260K.gguf";
            if (fs::exists(p, ec)) return p.string();
        }
        return std::string("models/stories260K.gguf");
    }();
    return path.c_str();
}

std::unique_ptr<Model> load_draft_model(const SpeculativeConfig& spec, Backend& backend, const Tokenizer& tokenizer) {
    if (!spec.enabled() || spec.method != SpeculativeMethod::Draft) return nullptr;
    std::unique_ptr<Model> draft;
    try {
        draft = Model::load(spec.model, backend);
        check_draft_vocabulary(tokenizer, *Tokenizer::from_gguf(draft->file()));
    } catch (const std::exception& e) {
        throw UsageError("--speculative-model " + spec.model + ": " + e.what());
    }
    return draft;
}

std::unique_ptr<LLMEngine> make_engine(const Model& model, const Tokenizer& tokenizer, const EngineConfig& config,
                                       const Model* draft_model) {
    try {
        return std::make_unique<LLMEngine>(model, tokenizer, config, draft_model);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
}

}  // namespace minfer::cli

namespace minfer::cli {

ChatTemplate chat_template_of(const Model& model, const Tokenizer& tokenizer, const std::string& override_file_or_name) {
    if (override_file_or_name.empty() && !model.file().has("tokenizer.chat_template"))
        std::fprintf(stderr,
                     "minfer: warning: %s has no chat template (tokenizer.chat_template): using chatml, which a base "
                     "model was not trained on; --chat-template FILE|NAME picks another\n",
                     model.file().path().c_str());
    return chat_template_for_model(model.file(), tokenizer, override_file_or_name);
}

}  // namespace minfer::cli
