// The members of a JSON object as a schema has them (json_schema.cpp's
// helpers): the named properties in the order of `properties`, then other
// keys, with minProperties and maxProperties counted as they are written.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace minfer::grammar {

// A rule for a JSON string that is none of `names`. Its characters are
// written plainly (no escapes): an escaped key could spell a name and escape
// that name's schema, so keys other than the named ones are held to plain
// characters, which rejects a few valid texts and accepts no invalid one. One
// rule a node of the names' trie (over code points), named `id`0, `id`1, ...
// and appended to `rules`; returns the expression.
std::string key_not_in_gbnf(const std::vector<std::string>& names, const std::string& id, std::string& rules);

struct ObjectMembers {
    std::vector<std::pair<std::string, std::string>> properties;  // (name, value rule) in schema order
    std::set<std::string> required;
    std::string other;  // one other member (key ws ":" ws value ws); "" when none may come
    int64_t min_properties = 0;
    int64_t max_properties = -1;  // -1: no maximum
};

// What lies between the braces: a rule a state (i, c), properties i.. still to
// come with c written so far (c > 0 puts a comma first; without a maximum, c
// stops counting at what minProperties needs). Other keys come after the named
// ones and count for one at most toward minProperties: one other key differs
// from the named ones, but two may repeat a key, which a parser reads as one
// property (toward maxProperties each counts: a repeat only lowers the count).
// The rules are named `id`s<i>c<c> and appended to `rules`; returns the start
// rule, nullopt when no object has the members asked for.
std::optional<std::string> object_members_gbnf(const ObjectMembers& m, const std::string& id, std::string& rules);

}  // namespace minfer::grammar
