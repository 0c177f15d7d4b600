#include "engine/cli/cli_common.h"

#include <filesystem>
#include <system_error>

#include "engine/cli/commands.h"
#include "engine/model_source.h"

namespace minfer::cli {

cxxopts::ParseResult parse_or_usage(cxxopts::Options& opts, int argc, char** argv) {
    try {
        return opts.parse(argc, argv);
    } catch (const cxxopts::exceptions::exception& e) {
        throw UsageError(e.what());
    }
}

void add_synthetic_option(cxxopts::Options& opts) {
    opts.add_options()("synthetic", "use a random-weight model built in memory instead of a file: PRESET[:DTYPE] "
                                    "(see minfer synth --list)", cxxopts::value<std::string>());
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
