// Runs a parsed template: statements write text, expressions evaluate to
// Values. Scoping is jinja2's: a for-loop iteration, a macro call and the
// body of a {% filter %}, {% set %}...{% endset %} or {% with %} block see
// the names around them but keep their own `set`s to themselves (hence
// namespace()); an {% if %} is no scope.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "engine/text/chat/jinja_parser.h"
#include "engine/text/chat/jinja_value.h"

namespace minfer::jinja {

// Renders `program` with these top-level variables (they shadow the globals:
// range, dict, namespace, raise_exception, strftime_now). Throws
// TemplateError, with the line where it happened; never runs past `limits`.
std::string render(const Program& program, const std::vector<std::pair<std::string, Value>>& variables,
                   const RenderLimits& limits = {});

}  // namespace minfer::jinja
