#include "cli/grammar_options.h"

#include <boost/json.hpp>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "engine/grammar/builtin.h"
#include "engine/grammar/gbnf.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/regex.h"

namespace minfer::cli {

namespace {

std::string read_option_file(const std::string& option, const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw UsageError(option + ": cannot read " + path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

}  // namespace

void add_constraint_options(cxxopts::Options& opts, bool with_choice) {
    // clang-format off
    opts.add_options()
        ("grammar-file", "FILE: a GBNF grammar (llama.cpp's format) the text must follow", cxxopts::value<std::string>())
        ("regex", "a regular expression (ECMAScript) the whole text must match", cxxopts::value<std::string>())
        ("json-schema", "FILE: a JSON Schema the text must validate against", cxxopts::value<std::string>());
    add_json_compact_option(opts);
    if (with_choice) opts.add_options()("choice", "A,B,...: the text is one of these strings", cxxopts::value<std::string>());
    // clang-format on
}

void add_json_compact_option(cxxopts::Options& opts) {
    opts.add_options()("json-compact", "JSON Schema output without whitespace between tokens (only ',' and ':' between them)");
}

grammar::JsonSchemaOptions json_schema_options(const cxxopts::ParseResult& args) {
    return grammar::JsonSchemaOptions{.compact = args.count("json-compact") > 0};
}

std::shared_ptr<const grammar::Grammar> constraint_from(const cxxopts::ParseResult& args) {
    const char* names[] = {"grammar-file", "regex", "json-schema", "choice"};
    std::string given;
    int count = 0;
    for (const char* n : names)
        if (args.count(n)) given = n, ++count;
    if (count > 1) throw UsageError("--grammar-file, --regex, --json-schema and --choice: one constraint at a time");
    if (args.count("json-compact") && given != "json-schema") throw UsageError("--json-compact goes with --json-schema");
    if (count == 0) return nullptr;
    const std::string value = args[given].as<std::string>();
    try {
        if (given == "grammar-file") return std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(read_option_file("--grammar-file", value)));
        if (given == "regex") return std::make_shared<const grammar::Grammar>(grammar::regex_grammar(value));
        if (given == "choice") {
            std::vector<std::string> choices;
            std::stringstream ss(value);
            for (std::string c; std::getline(ss, c, ',');) choices.push_back(c);
            return std::make_shared<const grammar::Grammar>(grammar::choice_grammar(choices));
        }
        boost::system::error_code ec;
        const boost::json::value schema = boost::json::parse(read_option_file("--json-schema", value), ec);
        if (ec) throw UsageError("--json-schema " + value + ": not valid JSON (" + ec.message() + ")");
        try {
            return std::make_shared<const grammar::Grammar>(grammar::json_schema_grammar(schema, json_schema_options(args)));
        } catch (const grammar::GrammarError& e) {
            throw UnsupportedSchema("--json-schema " + value + ": " + e.what());
        }
    } catch (const grammar::GrammarError& e) {
        throw UsageError("--" + given + (given == "regex" || given == "choice" ? "" : " " + value) + ": " + e.what());
    }
}

}  // namespace minfer::cli
