// minfer grammar check: does a constraint accept these texts, token by token,
// through the masks a sampler would see? And how long does a mask take?
//
//   minfer grammar check [MODEL] (--json-schema F | --grammar-file F | --regex R | --choice A,B,...)
//                        --input INSTANCES.jsonl [--json]
//
// Each input line is {"text": "..."}: the text is tokenized with the model's
// tokenizer (no BOS), and each token must be in the mask of allowed tokens
// at its step; at the end the text must be a whole sentence. One line a text,
// {"index": i, "accepted": true|false}, then a summary: compile time, masks
// computed, and mask time percentiles (MaskBench's measures, one thread).
// A schema the compiler cannot enforce exactly exits 3 with one line.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <boost/json.hpp>
#include <cxxopts.hpp>
#include <fmt/format.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/grammar_options.h"
#include "engine/core/generate.h"
#include "engine/gguf/gguf.h"
#include "engine/grammar/constraint.h"
#include "engine/text/tokenizer.h"

namespace minfer::cli {

namespace {

using Clock = std::chrono::steady_clock;

double micros(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }

int grammar_check(int argc, char** argv) {
    cxxopts::Options opts = command_options("grammar check",
                                            "Walk texts through a constraint's token masks, as a sampler would, and time the masks.",
                                            "[MODEL] (--json-schema F | --grammar-file F | --regex R | --choice A,B,...) --input F");
    add_model_file_option(opts, "model", "GGUF file whose tokenizer is used (vocab-only files work)");
    add_constraint_options(opts, /*with_choice=*/true);
    // clang-format off
    opts.add_options()
        ("input", "JSONL file: one {\"text\": ...} a line", cxxopts::value<std::string>())
        ("json", "print the summary as JSON (the per-text lines are JSON anyway)");
    // clang-format on
    const cxxopts::ParseResult args = parse_command(opts, argc, argv, {"model"});
    if (!args.count("input")) throw UsageError("--input is required");

    const auto t0 = Clock::now();
    std::shared_ptr<const grammar::Grammar> g;
    try {
        g = constraint_from(args);
    } catch (const UnsupportedSchema& e) {
        std::fprintf(stderr, "minfer grammar check: %s\n", e.what());
        return 3;
    }
    const double compile_ms = micros(t0, Clock::now()) / 1000;
    if (!g) throw UsageError("one of --json-schema, --grammar-file, --regex or --choice is required");

    const GGUFFile file = open_model_arg(args, "model", /*weights=*/false);
    const auto tokenizer = Tokenizer::from_gguf(file);
    const auto vocabulary = token_vocabulary(*tokenizer);

    std::ifstream in(args["input"].as<std::string>());
    if (!in) throw UsageError("--input: cannot read " + args["input"].as<std::string>());
    std::vector<double> mask_us;
    std::vector<uint32_t> mask;
    std::string line;
    for (int index = 0, line_no = 1; std::getline(in, line); ++line_no) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        boost::system::error_code ec;
        const boost::json::value v = boost::json::parse(line, ec);
        if (ec || !v.is_object() || !v.as_object().contains("text") || !v.as_object().at("text").is_string())
            throw UsageError(fmt::format("--input line {}: expected {{\"text\": \"...\"}}", line_no));
        const std::string text(v.as_object().at("text").get_string());
        grammar::Constraint c(g, vocabulary);
        bool accepted = true;
        for (const int32_t id : tokenizer->encode(text, /*add_special=*/false)) {
            const auto m0 = Clock::now();
            c.mask(mask, {});
            mask_us.push_back(micros(m0, Clock::now()));
            if (!(mask[size_t(id) / 32] >> (id % 32) & 1u) || !c.accept(id)) {
                accepted = false;
                break;
            }
        }
        accepted = accepted && c.accepting();
        std::printf("{\"index\": %d, \"accepted\": %s}\n", index++, accepted ? "true" : "false");
    }
    std::sort(mask_us.begin(), mask_us.end());
    auto pct = [&](double q) { return mask_us.empty() ? 0.0 : mask_us[std::min(mask_us.size() - 1, size_t(q * double(mask_us.size())))]; };
    boost::json::object s{{"compile_ms", compile_ms}, {"masks", mask_us.size()}, {"mask_us_p50", pct(0.5)},
                          {"mask_us_p99", pct(0.99)}, {"mask_us_max", mask_us.empty() ? 0.0 : mask_us.back()}};
    std::printf("%s\n", boost::json::serialize(boost::json::object{{"summary", s}}).c_str());
    return 0;
}

}  // namespace

int cmd_grammar(int argc, char** argv) {
    if (argc < 2 || std::string(argv[1]) != "check")
        throw UsageError("usage: minfer grammar check [MODEL] (--json-schema F | --grammar-file F | --regex R | --choice A,B,...) --input F");
    return grammar_check(argc - 1, argv + 1);
}

}  // namespace minfer::cli
