// The constraint options `run` and `grammar check` share: --grammar-file F
// (GBNF), --regex R, --json-schema F and --choice A,B,... (check only), one at
// a time, compiled to a Grammar; a bad one is a usage error that says where.
// --json-compact: the schema's JSON without whitespace between tokens.
#pragma once

#include <cxxopts.hpp>
#include <memory>

#include "engine/grammar/grammar.h"
#include "engine/grammar/json_schema.h"

namespace minfer::cli {

// with_choice: also --choice (a comma-separated list). Adds --json-compact too.
void add_constraint_options(cxxopts::Options& opts, bool with_choice);
// --json-compact alone (`minfer generate`: the default of its requests' JSON constraints).
void add_json_compact_option(cxxopts::Options& opts);
grammar::JsonSchemaOptions json_schema_options(const cxxopts::ParseResult& args);
// The grammar the options name, or null when none does. A schema keyword that
// cannot be enforced throws UnsupportedSchema (`grammar check` exits 3 on it).
std::shared_ptr<const grammar::Grammar> constraint_from(const cxxopts::ParseResult& args);

struct UnsupportedSchema : std::runtime_error {
    using std::runtime_error::runtime_error;
};

}  // namespace minfer::cli
