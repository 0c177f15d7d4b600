// Grammars the API asks for by name rather than by source: any JSON object
// (`response_format: {"type": "json_object"}`) and a choice among strings
// (`guided_choice`, `structured_outputs.choice`).
#pragma once

#include <string>
#include <vector>

#include "engine/grammar/grammar.h"

namespace minfer::grammar {

// Any JSON object (RFC 8259); between tokens nothing, a space, or a line break
// and up to 20 spaces or tabs (so that whitespace cannot run on forever);
// nothing after the closing brace.
Grammar json_object_grammar();

// Exactly one of the strings (at least one; they may share prefixes).
Grammar choice_grammar(const std::vector<std::string>& choices);

}  // namespace minfer::grammar
