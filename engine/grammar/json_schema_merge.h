// allOf, and $ref beside other keywords (draft 2020-12 applies both, as an
// allOf of the target and the siblings): the conjunction of schemas as one
// schema, where that is exact.
#pragma once

#include <boost/json.hpp>

#include <set>
#include <string>
#include <vector>

namespace minfer::grammar {

// The keywords that only annotate (and $defs, read through $ref).
extern const std::set<std::string> kSchemaAnnotations;

// One schema that validates exactly what every part validates. The parts are
// objects with no $ref or allOf of their own (json_schema.cpp opens those).
// A keyword in one part applies beside the others' when it does not depend on
// a neighbour: properties merge by name (a property in two parts is refused
// unless its schemas are equal), required lists join, type lists intersect
// (integer within number), the min*/max* limits take the tighter bound, any
// other keyword in two parts must be equal. Refused (at `at`): additionalProperties
// beside another part's properties, items beside another part's prefixItems
// (each reads its own neighbour), two different patterns or formats.
boost::json::object merge_schemas(const std::vector<const boost::json::value*>& parts, const std::string& at);

}  // namespace minfer::grammar
