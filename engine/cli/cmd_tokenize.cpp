// minfer tokenize [MODEL] --text T [--no-bos] [--json]
#include <cstdio>
#include <string>
#include <vector>

#include <cxxopts.hpp>
#include <fmt/format.h>

#include "engine/cli/cli_common.h"
#include "engine/cli/commands.h"
#include "engine/gguf.h"
#include "engine/tokenizer.h"

namespace minfer::cli {

namespace {

// A piece on one line: control characters (a newline piece, say) as escapes.
std::string printable_piece(const std::string& piece) {
    std::string out;
    for (char ch : piece) {
        const auto c = static_cast<unsigned char>(ch);
        if (c == '\n') out += "\\n";
        else if (c == '\t') out += "\\t";
        else if (c == '\r') out += "\\r";
        else if (c == '\\') out += "\\\\";
        else if (c < 0x20 || c == 0x7F) out += fmt::format("\\x{:02x}", c);
        else out.push_back(ch);
    }
    return out;
}

}  // namespace

int cmd_tokenize(int argc, char** argv) {
    cxxopts::Options opts("minfer tokenize",
                           "Turn text into token ids with the tokenizer of a GGUF file (vocab-only files work).\n"
                           "MODEL defaults to the bundled model.");
    opts.positional_help("[MODEL]");
    // clang-format off
    opts.add_options()
        ("model", "GGUF file", cxxopts::value<std::string>()->default_value(default_model_path()))
        ("t,text", "text to tokenize", cxxopts::value<std::string>())
        ("no-bos", "add no special token (no BOS, no EOS)")
        ("json", "print one line: {\"ids\": [...]}")
        ("h,help", "print this help");
    // clang-format on
    add_synthetic_option(opts);
    opts.parse_positional({"model"});
    const auto args = parse_or_usage(opts, argc, argv);
    if (args.count("help")) {
        std::printf("%s\n", opts.help().c_str());
        return 0;
    }
    if (!args.unmatched().empty()) throw UsageError("unexpected argument '" + args.unmatched().front() + "'");
    if (!args.count("text")) throw UsageError("--text is required");

    const GGUFFile file = open_model_arg(args, "model", /*weights=*/false);
    const auto tokenizer = Tokenizer::from_gguf(file);
    const std::vector<int32_t> ids = tokenizer->encode(args["text"].as<std::string>(), !args.count("no-bos"));

    if (args.count("json")) {
        std::printf("{\"ids\": [%s]}\n", fmt::format("{}", fmt::join(ids, ", ")).c_str());
        return 0;
    }
    for (int32_t id : ids) std::printf("%d\t%s\n", id, printable_piece(tokenizer->piece(id)).c_str());
    return 0;
}

}  // namespace minfer::cli
