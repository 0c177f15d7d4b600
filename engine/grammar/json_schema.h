// JSON Schema (draft 2020-12) compiled to a Grammar of the JSON texts that
// validate, for `response_format: {"type": "json_schema"}`, `guided_json` and
// llama.cpp's `json_schema`.
//
// Exact or refused: every keyword taken is enforced exactly; a keyword this
// compiler cannot enforce is a GrammarError that names it and where it is (a
// JSON pointer), never a looser grammar. Taken so far: type (and lists of
// types), enum, const, properties, required, additionalProperties (false,
// true or a schema: other properties come after the named ones, their keys
// written without escapes, since an escaped key could spell a named one), items, prefixItems, minItems,
// maxItems, minLength, maxLength, anyOf, allOf of one schema, $ref to "#",
// "#/$defs/..." and "#/definitions/..." (recursion included), and the
// annotations (title, description, default, examples, $schema, $id,
// $comment). Properties come in the order of `properties` (as llguidance and
// MaskBench have it); between tokens, whitespace as pretty-printers write it:
// nothing, a space, or a line break and up to 20 spaces or tabs (as llama.cpp's
// schema grammars bound it, so that a model cannot pad forever); none before
// the value or after it.
#pragma once

#include <boost/json.hpp>

#include <string>
#include <string_view>

#include "engine/grammar/grammar.h"

namespace minfer::grammar {

Grammar json_schema_grammar(const boost::json::value& schema);

// The same as GBNF source, for front ends that embed a schema in a larger
// grammar (tool calls): `root_name ::= ...` first, then its rules, the JSON
// pieces among them (ws, json-string, json-value, ... and s0, s1, ... one a
// subschema), so an embedding must not define those names.
std::string json_schema_gbnf(const boost::json::value& schema, std::string_view root_name);

}  // namespace minfer::grammar
