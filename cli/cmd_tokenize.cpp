// minfer tokenize [MODEL] (--text T | --batch) [--no-bos] [--parse-special] [--json]
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <boost/json.hpp>
#include <cxxopts.hpp>
#include <fmt/format.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "engine/gguf/gguf.h"
#include "engine/text/tokenizer.h"

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
    cxxopts::Options opts = command_options(
        "tokenize",
        "Turn text into token ids with the tokenizer of a GGUF file (vocab-only files work).\n"
        "MODEL defaults to the bundled model.",
        "[MODEL] [options]");
    add_model_file_option(opts, "model", "GGUF file");
    // clang-format off
    opts.add_options()
        ("t,text", "text to tokenize", cxxopts::value<std::string>())
        ("no-bos", "add no special token (no BOS, no EOS)")
        ("parse-special", "turn the texts of special tokens (<|im_start|>, <s>) into those tokens")
        ("json", "print one line: {\"ids\": [...]}")
        ("batch", "read one JSON string per line on stdin, print one {\"ids\": [...]} line for each");
    // clang-format on
    add_synthetic_option(opts);
    const cxxopts::ParseResult args = parse_command(opts, argc, argv, {"model"});
    const bool batch = args.count("batch") > 0;
    if (!args.count("text") && !batch) throw UsageError("--text or --batch is required");
    if (args.count("text") && batch) throw UsageError("--text and --batch exclude each other");

    const GGUFFile file = open_model_arg(args, "model", /*weights=*/false);
    const auto tokenizer = Tokenizer::from_gguf(file);
    const bool add_special = !args.count("no-bos");
    const bool parse_special = args.count("parse-special") > 0;

    if (batch) {
        // Many texts for one load of the vocabulary (tests, oracles): JSON
        // strings carry any text, newlines and NULs included.
        std::string line;
        for (int line_no = 1; std::getline(std::cin, line); ++line_no) {
            boost::system::error_code ec;
            const boost::json::value v = boost::json::parse(line, ec);
            if (ec || !v.is_string())
                throw UsageError(fmt::format("--batch: line {} of stdin is not a JSON string", line_no));
            const boost::json::string& text = v.get_string();
            const std::vector<int32_t> ids =
                tokenizer->encode(std::string_view(text.data(), text.size()), add_special, parse_special);
            std::printf("{\"ids\": [%s]}\n", fmt::format("{}", fmt::join(ids, ", ")).c_str());
        }
        return 0;
    }
    const std::vector<int32_t> ids = tokenizer->encode(args["text"].as<std::string>(), add_special, parse_special);

    if (args.count("json")) {
        std::printf("{\"ids\": [%s]}\n", fmt::format("{}", fmt::join(ids, ", ")).c_str());
        return 0;
    }
    for (int32_t id : ids) std::printf("%d\t%s\n", id, printable_piece(tokenizer->piece(id)).c_str());
    return 0;
}

}  // namespace minfer::cli
