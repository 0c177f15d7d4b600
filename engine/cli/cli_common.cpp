#include "engine/cli/cli_common.h"

#include <filesystem>
#include <system_error>

#include "engine/cli/commands.h"

namespace minfer::cli {

cxxopts::ParseResult parse_or_usage(cxxopts::Options& opts, int argc, char** argv) {
    try {
        return opts.parse(argc, argv);
    } catch (const cxxopts::exceptions::exception& e) {
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

}  // namespace minfer::cli
