// JSON Schema (draft 2020-12) compiled to a Grammar of the JSON texts that
// validate, for `response_format: {"type": "json_schema"}`, `guided_json` and
// llama.cpp's `json_schema`.
//
// Exact or refused: every keyword taken is enforced exactly; a keyword this
// compiler cannot enforce is a GrammarError that names it and where it is (a
// JSON pointer), never a looser grammar. Taken so far: type (and lists of
// types), enum, const (beside type alone: the values of that type), properties,
// required, additionalProperties (false, true or a schema: other properties
// come after the named ones, their keys written without escapes, since an
// escaped key could spell a named one), minProperties and maxProperties
// (counted as written; other keys count for one at most toward minProperties,
// since two could repeat a key: json_schema_objects.h), items, prefixItems,
// minItems, maxItems, minLength, maxLength, anyOf, oneOf whose branches cannot
// overlap, allOf and $ref beside other keywords (the conjunction merged into
// one schema where exact: json_schema_merge.h), $ref to "#", "#/$defs/..." and
// "#/definitions/..." (recursion included), and the annotations (title,
// description, default, examples, $schema, $id, $comment). Properties come in
// the order of `properties` (as llguidance and MaskBench have it); between
// tokens, whitespace as pretty-printers write it: nothing, a space, or a line
// break and up to 20 spaces or tabs (as llama.cpp's schema grammars bound it,
// so that a model cannot pad forever), or none at all with
// JsonSchemaOptions::compact; none before the value or after it. pattern
// (ECMAScript, as regex.h takes it; unanchored unless it begins with ^ and
// ends with $) and format (date, time, date-time, email, uuid, uri, ipv4,
// ipv6 not) hold strings written plainly: a string under them has no escapes,
// which rejects a few valid texts and accepts no invalid one; they are refused
// beside minLength or maxLength. minimum, maximum and the exclusive ones bound
// integers, and numbers exactly in decimal, written without an exponent
// (json_schema_numbers.h says why); without a type they bound numbers.
#pragma once

#include <boost/json.hpp>

#include <string>
#include <string_view>

#include "engine/grammar/grammar.h"

namespace minfer::grammar {

struct JsonSchemaOptions {
    // No whitespace between tokens: "," and ":" alone separate them (vLLM's
    // disable_any_whitespace, `--json-compact`). Strings keep theirs.
    bool compact = false;
};

Grammar json_schema_grammar(const boost::json::value& schema, const JsonSchemaOptions& options = {});

// The same embedded in a larger grammar (tool calls): the schema's rule is
// named `schema_rule`, and `wrapper` (GBNF) defines `root` around it. The
// schema's own rules are named s0, s1, ..., ws, json-string, json-value and
// the like; the wrapper must not define those.
Grammar json_schema_grammar(const boost::json::value& schema, std::string_view wrapper, std::string_view schema_rule,
                            const JsonSchemaOptions& options = {});

}  // namespace minfer::grammar
