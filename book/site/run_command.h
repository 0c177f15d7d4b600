// Runs a program (no shell, so paths need no quoting) and returns what it
// printed on stdout. The site uses it for `git ls-files` and `ctags`.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace minfer::book {

struct CommandResult {
    int exit_code = -1;
    std::string out;
};

// nullopt when the program cannot be started at all (not installed).
std::optional<CommandResult> run_command(const std::vector<std::string>& argv);

}  // namespace minfer::book
