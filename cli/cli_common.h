// Helpers shared by the subcommands.
#pragma once

#include <cxxopts.hpp>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/core/llm_engine.h"
#include "engine/text/chat/chat_template.h"

namespace minfer::cli {

// A bad flag or argument: main() prints it as one line and exits with 2.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// The options of a subcommand: "minfer NAME", what it does, the usage line
// printed after the name (cxxopts' default when empty), and -h/--help.
cxxopts::Options command_options(const std::string& name, const std::string& description,
                                 const std::string& usage = "");
// The model file a command reads, a positional argument (MODEL) that defaults
// to the bundled model.
void add_model_file_option(cxxopts::Options& opts, const std::string& name = "model",
                           const std::string& help = "GGUF model file");

// --help was given: parse_command printed the help, and main() exits with 0.
struct HelpPrinted {};

// The preamble of every subcommand: names the positional arguments and parses.
// For --help it prints the help (of `help_groups`; all when empty) and throws
// HelpPrinted. cxxopts' own parse errors and arguments left over are UsageErrors.
cxxopts::ParseResult parse_command(cxxopts::Options& opts, int argc, char** argv,
                                   const std::vector<std::string>& positional = {},
                                   const std::vector<std::string>& help_groups = {});

// --synthetic PRESET[:DTYPE], for every command that takes a model file: a
// random-weight model (minfer synth --list) built in memory instead.
void add_synthetic_option(cxxopts::Options& opts);
// The model a command works on: the --synthetic one if given, else the file
// named by `file_option`. Both at once, or a bad spec, is a UsageError. With
// weights = false a synthetic model has only its metadata and tokenizer.
GGUFFile open_model_arg(const cxxopts::ParseResult& args, const std::string& file_option, bool weights = true);

// What every command that runs a model on its own takes besides --device:
// --synthetic, --quantization and --kv-cache-dtype.
void add_model_run_options(cxxopts::Options& opts);

// --device (cpu, cuda or auto) and, with threads, --threads, under `group`.
void add_device_options(cxxopts::Options& opts, bool threads, const std::string& group = "");

// The engine's flags (vLLM's names): --max-num-seqs, --max-num-batched-tokens,
// --max-model-len, --block-size, --num-kv-blocks, --kv-cache-memory,
// --no-prefix-caching, --scheduling-policy, --kv-cache-dtype, plus --device and --threads.
void add_engine_options(cxxopts::Options& opts);
// --quantization none|fp8 (part of add_engine_options; for commands that declare their own --device).
void add_quantization_option(cxxopts::Options& opts);
// --kv-cache-dtype auto|float32|bfloat16 (part of add_engine_options); auto is nullopt.
void add_kv_cache_dtype_option(cxxopts::Options& opts);
std::optional<KVDType> kv_cache_dtype_from(const cxxopts::ParseResult& args);
// Speculative decoding's flags (part of add_engine_options; `minfer run` adds
// them alone): --speculative-method, --num-speculative-tokens,
// --speculative-model, --prompt-lookup-min/-max,
// --speculative-disable-by-batch-size and vLLM's --speculative-config JSON.
void add_speculative_options(cxxopts::Options& opts);
SpeculativeConfig speculative_config_from(const cxxopts::ParseResult& args);
// One line to stderr: drafts, acceptance rate, mean acceptance length, acceptance per position.
void print_spec_summary(const SpecDecodeStats& stats, const SpeculativeConfig& config);
EngineConfig engine_config_from(const cxxopts::ParseResult& args);
// The engine over a model; a configuration it refuses (too small a pool, ...) is a UsageError.
std::unique_ptr<LLMEngine> make_engine(const Model& model, const Tokenizer& tokenizer, const EngineConfig& config,
                                       const Model* draft_model = nullptr);
// With --speculative-method draft: the draft model on `backend`, its
// vocabulary checked against the model's (a UsageError that names the first
// token that differs); otherwise null.
std::unique_ptr<Model> load_draft_model(const SpeculativeConfig& spec, Backend& backend, const Tokenizer& tokenizer);

// The backend --device names (and --threads and --quantization, for commands
// that have them); a bad value, or fp8 without a GPU, is a UsageError.
// The backend --device and --threads ask for, for this process's place in a parallel run.
std::unique_ptr<Backend> backend_from(const cxxopts::ParseResult& args, const World& world = {});

// The chat template of a model (its own, else --chat-template's, else chatml).
// A model without one and no --chat-template gets a line on stderr: a base
// model (gemma-3-270m's GGUF, say) was not trained on chatml's turns.
ChatTemplate chat_template_of(const Model& model, const Tokenizer& tokenizer, const std::string& override_file_or_name);

// An integer flag within lo..hi: otherwise a UsageError, "--NAME must be >= LO"
// (no upper bound) or "--NAME must be in LO..HI".
int32_t int_option(const cxxopts::ParseResult& args, const std::string& name, int32_t lo,
                   int32_t hi = std::numeric_limits<int32_t>::max());

// "4G", "512M", "1048576": a size in bytes (K/M/G/T are powers of 1024).
size_t parse_bytes(const std::string& text, const std::string& flag);

}  // namespace minfer::cli
