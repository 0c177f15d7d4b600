// Helpers shared by the subcommands.
#pragma once

#include <cxxopts.hpp>
#include <stdexcept>
#include <string>

#include "engine/gguf.h"

namespace minfer::cli {

// A bad flag or argument: main() prints it as one line and exits with 2.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// cxxopts' own parse errors become UsageErrors.
cxxopts::ParseResult parse_or_usage(cxxopts::Options& opts, int argc, char** argv);

// --synthetic PRESET[:DTYPE], for every command that takes a model file: a
// random-weight model (minfer synth --list) built in memory instead.
void add_synthetic_option(cxxopts::Options& opts);
// The model a command works on: the --synthetic one if given, else the file
// named by `file_option`. Both at once, or a bad spec, is a UsageError. With
// weights = false a synthetic model has only its metadata and tokenizer.
GGUFFile open_model_arg(const cxxopts::ParseResult& args, const std::string& file_option, bool weights = true);

}  // namespace minfer::cli
