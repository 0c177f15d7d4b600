// minfer synth --preset NAME --dtype DTYPE -o FILE [--seed S]: a random-weight
// GGUF in the shape of a real model (engine/gguf/synth.h), for tests and benchmarks.
#include <chrono>
#include <cstdio>
#include <string>

#include <cxxopts.hpp>
#include <fmt/format.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "engine/gguf/synth.h"

namespace minfer::cli {

namespace {

void print_presets() {
    std::printf("%-11s %-6s %-14s %5s %6s %5s %4s %6s %7s %8s %s\n", "preset", "arch", "shape of", "dim", "layers",
                "heads", "kv", "ffn", "vocab", "context", "notes");
    for (const SynthPreset& p : synth_presets()) {
        std::string notes = p.tied ? "tied" : "untied";
        if (p.qkv_bias) notes += ", qkv bias";
        if (p.is_moe()) notes += fmt::format(", {} experts of {}, {} a token", p.n_experts, p.expert_ffn_dim,
                                             p.n_experts_used);
        if (p.shared_ffn_dim > 0) notes += fmt::format(", shared expert of {}", p.shared_ffn_dim);
        if (p.rope_factor > 0) notes += fmt::format(", rope_freqs (factor {})", p.rope_factor);
        std::printf("%-11s %-6s %-14s %5d %6d %5d %4d %6d %7d %8d %s\n", p.name, p.arch, p.real_model, p.dim,
                    p.n_layers, p.n_heads, p.n_kv_heads, p.ffn_dim, p.vocab_size, p.context_len, notes.c_str());
    }
    std::printf("\ndtypes: f32 f16 bf16 q8_0 q4_k_m (llama.cpp's mix)\n");
}

}  // namespace

int cmd_synth(int argc, char** argv) {
    cxxopts::Options opts = command_options(
        "synth",
        "Write a GGUF file with deterministic random weights in the shape of a real model,\n"
        "with a working (synthetic) tokenizer. Other commands can build the same model in\n"
        "memory: --synthetic PRESET[:DTYPE].");
    // clang-format off
    opts.add_options()
        ("preset", "model shape (see --list)", cxxopts::value<std::string>())
        ("dtype", "f32, f16, bf16, q8_0 or q4_k_m", cxxopts::value<std::string>()->default_value("f32"))
        ("o,output", "GGUF file to write", cxxopts::value<std::string>())
        ("seed", "random seed", cxxopts::value<uint64_t>()->default_value("0"))
        ("threads", "generator threads (0: one per core)", cxxopts::value<int>()->default_value("0"))
        ("layers", "keep only the first N blocks (same shapes, fewer layers: for profiling one layer's kernels)",
         cxxopts::value<int32_t>())
        ("list", "list the presets and exit");
    // clang-format on
    const cxxopts::ParseResult args = parse_command(opts, argc, argv);
    if (args.count("list")) {
        print_presets();
        return 0;
    }
    if (!args.count("preset")) throw UsageError("--preset is required (see --list)");
    if (!args.count("output")) throw UsageError("-o FILE is required");

    const std::string name = args["preset"].as<std::string>();
    const SynthPreset* found = find_synth_preset(name);
    if (!found) throw UsageError("unknown preset '" + name + "' (see --list)");
    SynthPreset preset = *found;
    if (args.count("layers")) {
        const int32_t layers = args["layers"].as<int32_t>();
        if (layers < 1 || layers > found->n_layers)
            throw UsageError(fmt::format("--layers must be in 1..{} for {}", found->n_layers, found->name));
        preset.n_layers = layers;
    }
    SynthDType dtype;
    if (!parse_synth_dtype(args["dtype"].as<std::string>(), dtype))
        throw UsageError("--dtype must be f32, f16, bf16, q8_0 or q4_k_m, got '" + args["dtype"].as<std::string>() + "'");
    SynthOptions opt;
    opt.seed = args["seed"].as<uint64_t>();
    opt.threads = args["threads"].as<int>();

    const std::string path = args["output"].as<std::string>();
    const auto t0 = std::chrono::steady_clock::now();
    const uint64_t bytes = synth_write_file(preset, dtype, path, opt);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "%s: %s %s, %llu bytes (%.1f MiB) in %.1f s\n", path.c_str(), preset.name,
                 synth_dtype_name(dtype), static_cast<unsigned long long>(bytes), bytes / 1048576.0, secs);
    return 0;
}

}  // namespace minfer::cli
