// minfer grammar check: does a constraint accept these texts, token by token,
// through the masks a sampler would see? And how long does a mask take?
//
//   minfer grammar check [MODEL] (--json-schema F | --grammar-file F | --regex R | --choice A,B,...)
//                        --input INSTANCES.jsonl
//   minfer grammar bench [MODEL] DIR
//   minfer grammar export (--json-schema F | --grammar-file F | --regex R | --choice A,B,...)
//
// check: each input line is {"text": "..."}: the text is tokenized with the
// model's tokenizer (no BOS), and each token must be in the mask of allowed
// tokens at its step; at the end the text must be a whole sentence. One line a
// text, {"index": i, "accepted": true|false}, then a summary: compile time,
// masks computed, and mask time percentiles (MaskBench's measures, one
// thread). A schema the compiler cannot enforce exactly exits 3 with one line.
//
// bench: every JSON Schema in DIR's *.json files (a bare schema, {"schema",
// "tests"}, or the JSON-Schema-Test-Suite's list of them) is compiled, and
// each test instance (written compactly) walked through the masks as check
// does. One line a schema (compiled or the error; valid and invalid instances
// accepted), then a summary: compile and mask time percentiles over all of them.
//
// export: the compiled grammar as JSON (the book's mask figure runs it).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
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
#include "engine/grammar/json_schema.h"
#include "engine/text/tokenizer.h"

namespace minfer::cli {

namespace {

namespace json = boost::json;
using Clock = std::chrono::steady_clock;

double micros(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }

// Walks a text's tokens through the constraint's masks, timing each mask: true
// if every token was allowed and the text is whole at the end.
bool walk(grammar::Constraint& c, const std::vector<int32_t>& ids, std::vector<double>& mask_us) {
    std::vector<uint32_t> mask;
    for (const int32_t id : ids) {
        const auto m0 = Clock::now();
        c.mask(mask, {});
        mask_us.push_back(micros(m0, Clock::now()));
        if (size_t(id) / 32 >= mask.size() || !(mask[size_t(id) / 32] >> (id % 32) & 1u) || !c.accept(id)) return false;
    }
    return c.accepting();
}

double percentile(std::vector<double>& v, double q) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, size_t(q * double(v.size())))];
}

// {"summary": {...}} as a JSON line, or its fields as words.
void print_summary(const json::object& s, bool as_json) {
    if (as_json) {
        std::printf("%s\n", json::serialize(json::object{{"summary", s}}).c_str());
        return;
    }
    std::string words = "summary:";
    for (const auto& [k, v] : s)
        words += fmt::format(" {}={}", std::string(k), v.is_double() ? fmt::format("{:.3g}", v.get_double()) : json::serialize(v));
    std::printf("%s\n", words.c_str());
}

// The options' grammar into g; false (the line printed) for a schema keyword
// that cannot be enforced, which the subcommands exit 3 on.
bool compile_constraint(const cxxopts::ParseResult& args, const char* sub, std::shared_ptr<const grammar::Grammar>& g) {
    try {
        g = constraint_from(args);
        return true;
    } catch (const UnsupportedSchema& e) {
        std::fprintf(stderr, "minfer grammar %s: %s\n", sub, e.what());
        return false;
    }
}

int grammar_check(int argc, char** argv) {
    cxxopts::Options opts = command_options("grammar check",
                                            "Walk texts through a constraint's token masks, as a sampler would, and time the masks.",
                                            "[MODEL] (--json-schema F | --grammar-file F | --regex R | --choice A,B,...) --input F");
    add_model_file_option(opts, "model", "GGUF file whose tokenizer is used (vocab-only files work)");
    add_constraint_options(opts, /*with_choice=*/true);
    // clang-format off
    opts.add_options()
        ("input", "JSONL file: one {\"text\": ...} a line", cxxopts::value<std::string>())
        ("json", "the summary as a JSON line (else as words)");
    // clang-format on
    const cxxopts::ParseResult args = parse_command(opts, argc, argv, {"model"});
    if (!args.count("input")) throw UsageError("--input is required");

    const auto t0 = Clock::now();
    std::shared_ptr<const grammar::Grammar> g;
    if (!compile_constraint(args, "check", g)) return 3;
    const double compile_ms = micros(t0, Clock::now()) / 1000;
    if (!g) throw UsageError("one of --json-schema, --grammar-file, --regex or --choice is required");

    const GGUFFile file = open_model_arg(args, "model", /*weights=*/false);
    const auto tokenizer = Tokenizer::from_gguf(file);
    const auto vocabulary = token_vocabulary(*tokenizer);

    std::ifstream in(args["input"].as<std::string>());
    if (!in) throw UsageError("--input: cannot read " + args["input"].as<std::string>());
    std::vector<double> mask_us;
    std::string line;
    for (int index = 0, line_no = 1; std::getline(in, line); ++line_no) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        boost::system::error_code ec;
        const boost::json::value v = boost::json::parse(line, ec);
        if (ec || !v.is_object() || !v.as_object().contains("text") || !v.as_object().at("text").is_string())
            throw UsageError(fmt::format("--input line {}: expected {{\"text\": \"...\"}}", line_no));
        const std::string text(v.as_object().at("text").get_string());
        grammar::Constraint c(g, vocabulary);
        const bool accepted = walk(c, tokenizer->encode(text, /*add_special=*/false), mask_us);
        std::printf("{\"index\": %d, \"accepted\": %s}\n", index++, accepted ? "true" : "false");
    }
    boost::json::object s{{"compile_ms", compile_ms}, {"masks", mask_us.size()}, {"mask_us_p50", percentile(mask_us, 0.5)},
                          {"mask_us_p99", percentile(mask_us, 0.99)}, {"mask_us_max", percentile(mask_us, 1.0)}};
    print_summary(s, args.count("json") > 0);
    return 0;
}

// The compiled grammar as JSON, for the book's figure of a mask
// (book/figures/structured-mask.js runs it): rules of alternatives of
// symbols, ["c", class] or ["r", rule], and classes as code-point ranges.
int grammar_export(int argc, char** argv) {
    cxxopts::Options opts = command_options("grammar export", "Print a constraint's compiled grammar as JSON.",
                                            "(--json-schema F | --grammar-file F | --regex R | --choice A,B,...)");
    add_constraint_options(opts, /*with_choice=*/true);
    const cxxopts::ParseResult args = parse_command(opts, argc, argv, {});
    std::shared_ptr<const grammar::Grammar> g;
    if (!compile_constraint(args, "export", g)) return 3;
    if (!g) throw UsageError("one of --json-schema, --grammar-file, --regex or --choice is required");
    json::array rules, classes;
    for (const grammar::Rule& r : g->rules) {
        json::array alts;
        for (const grammar::Sequence& seq : r.alternatives) {
            json::array symbols;
            for (const grammar::Symbol& sym : seq)
                symbols.push_back(json::array{sym.kind == grammar::Symbol::Kind::Char ? "c" : "r", sym.index});
            alts.push_back(std::move(symbols));
        }
        rules.push_back(json::object{{"name", r.name}, {"alternatives", std::move(alts)}});
    }
    for (const grammar::CharClass& c : g->classes) {
        json::array ranges;
        for (const auto& [lo, hi] : c.ranges) ranges.push_back(json::array{lo, hi});
        classes.push_back(std::move(ranges));
    }
    std::printf("%s\n", json::serialize(json::object{{"root", g->root}, {"rules", rules}, {"classes", classes}}).c_str());
    return 0;
}

// The schemas of one file, each with its test instances ({data, valid}).
std::vector<std::pair<json::value, json::array>> schemas_in(const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    boost::system::error_code ec;
    const json::value v = json::parse(text.str(), ec);
    if (ec) throw UsageError(file.string() + ": not valid JSON (" + ec.message() + ")");
    std::vector<std::pair<json::value, json::array>> out;
    auto add = [&](const json::value& item) {
        const json::object* o = item.if_object();
        if (o && o->contains("schema") && o->contains("tests") && o->at("tests").is_array())
            out.emplace_back(o->at("schema"), o->at("tests").as_array());
        else
            out.emplace_back(item, json::array{});
    };
    if (v.is_array())
        for (const json::value& item : v.as_array()) add(item);
    else
        add(v);
    return out;
}

int grammar_bench(int argc, char** argv) {
    cxxopts::Options opts = command_options("grammar bench",
                                            "Compile every JSON Schema in a directory and walk its test instances through the masks; time both.",
                                            "[MODEL] DIR");
    add_model_file_option(opts, "model", "GGUF file whose tokenizer is used (vocab-only files work)");
    opts.add_options()("dir", "directory of *.json schemas", cxxopts::value<std::string>())(
        "json", "the summary as a JSON line (else as words)");
    const cxxopts::ParseResult args = parse_command(opts, argc, argv, {"model", "dir"});
    if (!args.count("dir")) throw UsageError("give the directory of schemas");
    const std::filesystem::path dir = args["dir"].as<std::string>();
    if (!std::filesystem::is_directory(dir)) throw UsageError(dir.string() + " is not a directory");
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(dir))
        if (e.path().extension() == ".json") files.push_back(e.path());
    std::sort(files.begin(), files.end());

    const GGUFFile file = open_model_arg(args, "model", /*weights=*/false);
    const auto tokenizer = Tokenizer::from_gguf(file);
    const auto vocabulary = token_vocabulary(*tokenizer);
    const auto w0 = Clock::now();
    vocabulary->masks.warm(grammar::json_schema_grammar(json::value(true)), vocabulary->trie);
    const double warm_ms = micros(w0, Clock::now()) / 1000;
    std::vector<double> compile_ms, mask_us;
    int64_t schemas = 0, compiled = 0, valid = 0, valid_accepted = 0, invalid = 0, invalid_accepted = 0;
    for (const auto& path : files) {
        const auto cases = schemas_in(path);
        for (size_t i = 0; i < cases.size(); ++i, ++schemas) {
            json::object line{{"file", path.filename().string()}, {"case", i}};
            std::shared_ptr<const grammar::Grammar> g;
            const auto t0 = Clock::now();
            try {
                g = std::make_shared<const grammar::Grammar>(grammar::json_schema_grammar(cases[i].first));
            } catch (const grammar::GrammarError& e) {
                line["compiled"] = false;
                line["error"] = e.what();
            }
            if (g) {
                ++compiled;
                compile_ms.push_back(micros(t0, Clock::now()) / 1000);
                line["compiled"] = true;
                line["compile_ms"] = compile_ms.back();
                int64_t n[2] = {0, 0}, ok[2] = {0, 0};  // [invalid, valid]
                const size_t first_mask = mask_us.size();
                for (const json::value& t : cases[i].second) {
                    const json::object* o = t.if_object();
                    if (!o || !o->contains("data")) continue;
                    const int is_valid = o->contains("valid") && o->at("valid") == true;
                    grammar::Constraint c(g, vocabulary);
                    ++n[is_valid];
                    ok[is_valid] += walk(c, tokenizer->encode(json::serialize(o->at("data")), false), mask_us);
                }
                line["valid"] = n[1];
                line["valid_accepted"] = ok[1];
                line["invalid"] = n[0];
                line["invalid_accepted"] = ok[0];
                line["masks"] = mask_us.size() - first_mask;
                if (mask_us.size() > first_mask) line["mask_us_max"] = *std::max_element(mask_us.begin() + long(first_mask), mask_us.end());
                valid += n[1], valid_accepted += ok[1], invalid += n[0], invalid_accepted += ok[0];
            }
            std::printf("%s\n", json::serialize(line).c_str());
        }
    }
    json::object s{{"warm_ms", warm_ms},
                   {"schemas", schemas},
                   {"compiled", compiled},
                   {"compile_ms_p50", percentile(compile_ms, 0.5)},
                   {"compile_ms_p99", percentile(compile_ms, 0.99)},
                   {"masks", mask_us.size()},
                   {"mask_us_p50", percentile(mask_us, 0.5)},
                   {"mask_us_p99", percentile(mask_us, 0.99)},
                   {"mask_us_max", percentile(mask_us, 1.0)},
                   {"valid", valid},
                   {"valid_accepted", valid_accepted},
                   {"invalid", invalid},
                   {"invalid_accepted", invalid_accepted}};
    print_summary(s, args.count("json") > 0);
    return 0;
}

}  // namespace

int cmd_grammar(int argc, char** argv) {
    const std::string usage =
        "usage: minfer grammar check [MODEL] (--json-schema F | --grammar-file F | --regex R | --choice A,B,...) --input F"
        ", or minfer grammar bench [MODEL] DIR, or minfer grammar export (--json-schema F | ...)";
    if (argc < 2) throw UsageError(usage);
    const std::string sub = argv[1];
    if (sub == "check") return grammar_check(argc - 1, argv + 1);
    if (sub == "bench") return grammar_bench(argc - 1, argv + 1);
    if (sub == "export") return grammar_export(argc - 1, argv + 1);
    throw UsageError(usage);
}

}  // namespace minfer::cli
