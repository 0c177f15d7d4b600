// Helpers shared by the subcommands.
#pragma once

#include <cxxopts.hpp>
#include <stdexcept>
#include <string>

namespace minfer::cli {

// A bad flag or argument: main() prints it as one line and exits with 2.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// cxxopts' own parse errors become UsageErrors.
cxxopts::ParseResult parse_or_usage(cxxopts::Options& opts, int argc, char** argv);

}  // namespace minfer::cli
