// The schema is translated to GBNF source, one rule a subschema, and compiled
// by parse_gbnf.
#include "engine/grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <optional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/grammar/gbnf.h"
#include "engine/grammar/integer_range.h"
#include "engine/grammar/json_schema_merge.h"
#include "engine/grammar/json_schema_numbers.h"
#include "engine/grammar/json_schema_objects.h"
#include "engine/grammar/json_schema_strings.h"
#include "engine/grammar/regex.h"

namespace minfer::grammar {

namespace json = boost::json;

namespace {

// The JSON pieces every schema grammar uses (after `ws`: flexible, or none).
constexpr const char* kFlexibleWs = "ws ::= ( \" \" | \"\\n\" [ \\t]{0,20} )?\n";
constexpr const char* kCompactWs = "ws ::= \"\"\n";
constexpr const char* kBase = R"(json-char ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
json-string ::= "\"" json-char* "\""
json-integer ::= "-"? ( "0" | [1-9] [0-9]* )
json-number ::= json-integer ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
json-value ::= json-object | json-array | json-string | json-number | "true" | "false" | "null"
json-object ::= "{" ws ( json-string ws ":" ws json-value ws ( "," ws json-string ws ":" ws json-value ws )* )? "}"
json-array ::= "[" ws ( json-value ws ( "," ws json-value ws )* )? "]"
)";

const std::set<std::string>& kAnnotations = kSchemaAnnotations;

class Compiler {
public:
    Compiler(const json::value& root, const JsonSchemaOptions& options) : root_(root), options_(options) {}

    std::string compile(std::string_view root_name) {
        const std::string start = rule_for(root_, "");
        return std::string(root_name) + " ::= " + start + "\n" + (options_.compact ? kCompactWs : kFlexibleWs) + kBase + rules_;
    }

private:
    [[noreturn]] static void refuse(const std::string& pointer, const std::string& why) { schema_error(pointer, why); }

    // The rule that matches what `schema` (at `pointer`) validates.
    std::string rule_for(const json::value& schema, const std::string& pointer) {
        if (auto it = names_.find(&schema); it != names_.end()) return it->second;
        const std::string name = "s" + std::to_string(names_.size());
        names_[&schema] = name;  // before the body: a $ref back here finds it
        rules_ += name + " ::= " + body(schema, pointer) + "\n";
        return name;
    }

    std::string body(const json::value& schema, const std::string& p) {
        if (schema.is_bool()) {
            if (!schema.get_bool()) refuse(p, "the schema false matches nothing");
            return "json-value";
        }
        if (!schema.is_object()) refuse(p, "a schema must be an object or a boolean");
        const json::object& s = schema.as_object();
        for (const auto& [key, v] : s) {
            const std::string k(key);
            static const std::set<std::string> kTaken = {
                "type",     "enum",      "const",    "properties", "required", "additionalProperties", "items",
                "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "anyOf",    "allOf",  "$ref",
                "pattern",  "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "oneOf",
                "minProperties", "maxProperties"};
            if (!kTaken.count(k) && !kAnnotations.count(k)) refuse(p, "'" + k + "' is not supported yet");
        }
        if (s.contains("$ref") || s.contains("allOf")) return all_of(schema, p);
        for (const char* key : {"anyOf", "oneOf"}) {
            if (!s.contains(key)) continue;
            const json::value& any = s.at(key);
            const std::string at = p + "/" + key;
            if (!any.is_array() || any.as_array().empty()) refuse(at, std::string("'") + key + "' must be a non-empty array");
            if (std::any_of(s.begin(), s.end(), [&](const auto& kv) {
                    return kv.key() != key && !kAnnotations.count(std::string(kv.key()));
                }))
                refuse(p, std::string("'") + key + "' beside other keywords is not supported yet");
            // oneOf is anyOf when no instance can match two branches.
            if (std::string(key) == "oneOf" && !disjoint(any.as_array(), at))
                refuse(at, "'oneOf' whose branches may overlap is not supported yet (they must differ in type, in "
                           "const or enum values, or in a required property's const)");
            std::string out = "(";
            for (size_t i = 0; i < any.as_array().size(); ++i)
                out += (i ? " | " : "") + rule_for(any.as_array()[i], at + "/" + std::to_string(i));
            return out + ")";
        }
        if (s.contains("const") || s.contains("enum")) return listed(s, p);
        std::vector<std::string> types;
        if (s.contains("type")) {
            const json::value& t = s.at("type");
            if (t.is_string()) {
                types.emplace_back(t.get_string());
            } else if (t.is_array()) {
                for (const json::value& x : t.as_array()) {
                    if (!x.is_string()) refuse(p + "/type", "'type' must be a string or an array of strings");
                    types.emplace_back(x.get_string());
                }
            } else {
                refuse(p + "/type", "'type' must be a string or an array of strings");
            }
        } else if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties") ||
                   s.contains("minProperties") || s.contains("maxProperties")) {
            types = {"object"};
        } else if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") || s.contains("maxItems")) {
            types = {"array"};
        } else if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
                   s.contains("exclusiveMaximum")) {
            types = {"number"};  // (other types would be valid too: left out, never let in)
        } else if (s.contains("minLength") || s.contains("maxLength") || s.contains("pattern") || s.contains("format")) {
            types = {"string"};
        } else {
            return "json-value";
        }
        std::string out = "(";
        for (size_t i = 0; i < types.size(); ++i) out += (i ? " | " : "") + of_type(types[i], s, p);
        return out + ")";
    }

    static int64_t count(const json::object& s, const char* key, const std::string& p, int64_t fallback) {
        if (!s.contains(key)) return fallback;
        const json::value& v = s.at(key);
        // (2.0 is an integer too: draft 2020-12 counts any number whose fraction is zero)
        const bool integral = v.is_int64() || v.is_uint64() || (v.is_double() && std::floor(v.get_double()) == v.get_double());
        if (!integral) refuse(p + "/" + key, std::string("'") + key + "' must be a non-negative integer");
        const int64_t n = v.is_int64()    ? v.get_int64()
                          : v.is_uint64() ? int64_t(std::min<uint64_t>(v.get_uint64(), 1u << 30))
                                          : int64_t(std::clamp(v.get_double(), -1.0, double(1u << 30)));
        if (n < 0) refuse(p + "/" + key, std::string("'") + key + "' must be a non-negative integer");
        if (n > 10000) refuse(p + "/" + key, std::string("'") + key + "' above 10000 is not supported");
        return n;
    }
    static std::string repeat(const std::string& what, int64_t lo, int64_t hi) {
        if (hi < 0) return what + "{" + std::to_string(lo) + ",}";
        return what + "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
    }

    std::string of_type(const std::string& type, const json::object& s, const std::string& p) {
        if (type == "null") return "\"null\"";
        if (type == "boolean") return "(\"true\" | \"false\")";
        const bool bounded = s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
                             s.contains("exclusiveMaximum");
        if (type == "integer") return bounded ? integer_range(s, p) : "json-integer";
        if (type == "number") {
            return bounded ? number_range(s, p) : "json-number";
        }
        if (type == "string") {
            if (s.contains("pattern") || s.contains("format")) return patterned_string(s, p);
            const int64_t lo = count(s, "minLength", p, 0), hi = count(s, "maxLength", p, -1);
            if (hi >= 0 && hi < lo) refuse(p, "'maxLength' is below 'minLength'");
            if (lo == 0 && hi < 0) return "json-string";
            return "\"\\\"\" " + repeat("json-char", lo, hi) + " \"\\\"\"";
        }
        if (type == "array") return array(s, p);
        if (type == "object") return object(s, p);
        refuse(p + "/type", "unknown type '" + type + "'");
    }

    // A rule for a JSON string that is none of `names` (json_schema_objects.h).
    std::string key_not_in(const std::vector<std::string>& names) {
        return key_not_in_gbnf(names, "k" + std::to_string(keys_++) + "n", rules_);
    }

    // ---- allOf and oneOf -------------------------------------------------------------

    static bool annotation_only(const json::value& v) {
        if (v.is_bool()) return v.get_bool();
        return v.is_object() && std::all_of(v.as_object().begin(), v.as_object().end(),
                                            [](const auto& kv) { return kAnnotations.count(std::string(kv.key())) > 0; });
    }

    // A schema with its $refs followed (to a bounded depth) where they stand
    // alone: a $ref with siblings is kept (its siblings constrain it too).
    const json::value& followed(const json::value* v, const std::string& p) const {
        for (int depth = 0; depth < 32 && v->is_object() && v->as_object().contains("$ref"); ++depth) {
            const json::object& o = v->as_object();
            if (std::any_of(o.begin(), o.end(), [](const auto& kv) { return kv.key() != "$ref" && !kAnnotations.count(std::string(kv.key())); }))
                break;
            v = &resolve(o.at("$ref"), p);
        }
        return *v;
    }

    // The schemas whose conjunction `v` is: $ref and allOf opened, their
    // siblings one more part (draft 2020-12 applies a $ref beside the other
    // keywords), parts that say nothing dropped. Each with its pointer.
    void conjuncts(const json::value& v, const std::string& p, std::vector<std::pair<const json::value*, std::string>>& out, int depth) {
        if (depth > 32) refuse(p, "'$ref' or 'allOf' nested too deep (a cycle?)");
        if (v.is_bool()) {
            if (!v.get_bool()) refuse(p, "the schema false matches nothing");
            return;
        }
        if (!v.is_object()) refuse(p, "a schema must be an object or a boolean");
        const json::object& s = v.as_object();
        if (!s.contains("$ref") && !s.contains("allOf")) {
            if (!annotation_only(v)) out.emplace_back(&v, p);
            return;
        }
        if (s.contains("$ref")) conjuncts(resolve(s.at("$ref"), p), pointer_of(s.at("$ref")), out, depth + 1);
        if (s.contains("allOf")) {
            const json::value& all = s.at("allOf");
            if (!all.is_array() || all.as_array().empty()) refuse(p + "/allOf", "'allOf' must be a non-empty array");
            for (size_t i = 0; i < all.as_array().size(); ++i)
                conjuncts(all.as_array()[i], p + "/allOf/" + std::to_string(i), out, depth + 1);
        }
        json::object rest;
        for (const auto& [k, x] : s)
            if (k != "$ref" && k != "allOf" && !kAnnotations.count(std::string(k))) rest[k] = x;
        if (rest.empty()) return;
        merged_.emplace_back(std::move(rest));
        out.emplace_back(&merged_.back(), p);
    }

    // allOf, and $ref with or without siblings: the parts that say something;
    // one is the schema (its own rule: recursion through a $ref ends there);
    // more merge into one schema where that is exact (json_schema_merge.h).
    std::string all_of(const json::value& schema, const std::string& p) {
        std::vector<std::pair<const json::value*, std::string>> parts;
        conjuncts(schema, p, parts, 0);
        if (parts.empty()) return "json-value";
        if (parts.size() == 1) return rule_for(*parts[0].first, parts[0].second);
        // A merged schema holds copies of its parts' subschemas; a $ref with
        // siblings among them, met again, must find this rule (by its text:
        // its $refs point into the root, so equal text is the same schema).
        const std::string text = json::serialize(schema);
        if (auto it = merged_names_.find(text); it != merged_names_.end()) return it->second;
        std::vector<const json::value*> schemas;
        for (const auto& part : parts) schemas.push_back(part.first);
        merged_.emplace_back(merge_schemas(schemas, p));
        const std::string name = "s" + std::to_string(names_.size());
        names_[&merged_.back()] = name;
        merged_names_[text] = name;
        rules_ += name + " ::= " + body(merged_.back(), p) + "\n";
        return name;
    }

    // const or enum: the values listed, those of `type` where it is beside them.
    std::string listed(const json::object& s, const std::string& p) {
        for (const auto& [k, v] : s)
            if (k != "const" && k != "enum" && k != "type" && !kAnnotations.count(std::string(k)))
                refuse(p, "'" + std::string(s.contains("const") ? "const" : "enum") + "' beside '" + std::string(k) +
                              "' is not supported yet");
        if (s.contains("const") && s.contains("enum")) refuse(p, "'const' beside 'enum' is not supported yet");
        json::array values;
        if (s.contains("const")) {
            values.push_back(s.at("const"));
        } else {
            const json::value& e = s.at("enum");
            if (!e.is_array() || e.as_array().empty()) refuse(p + "/enum", "'enum' must be a non-empty array");
            values = e.as_array();
        }
        std::string out;
        for (const json::value& x : values) {
            if (s.contains("type") && !of_types(x, s.at("type"))) continue;
            out += (out.empty() ? "(" : " | ") + gbnf_literal(json::serialize(x));
        }
        if (out.empty()) refuse(p, "no value listed is of the 'type' beside it: it matches nothing");
        return out + ")";
    }
    static bool of_types(const json::value& x, const json::value& type) {
        for (const json::value& t : type.is_array() ? type.as_array() : json::array{type}) {
            if (!t.is_string()) continue;
            const std::string n(t.get_string());
            const bool integral = x.is_int64() || x.is_uint64() || (x.is_double() && std::floor(x.get_double()) == x.get_double());
            if ((n == "null" && x.is_null()) || (n == "boolean" && x.is_bool()) || (n == "number" && x.is_number()) ||
                (n == "integer" && integral) || (n == "string" && x.is_string()) || (n == "array" && x.is_array()) ||
                (n == "object" && x.is_object()))
                return true;
        }
        return false;
    }

    // What kinds of JSON value a schema can match: null, boolean, number,
    // string, array, object (one bit each; all of them when it cannot tell).
    unsigned kinds(const json::value& v0, const std::string& p) const {
        constexpr unsigned kAll = 63;
        const json::value& v = followed(&v0, p);
        if (v.is_bool()) return v.get_bool() ? kAll : 0;
        if (!v.is_object()) return kAll;
        const json::object& s = v.as_object();
        auto kind_of = [](const json::value& x) -> unsigned {
            return x.is_null() ? 1 : x.is_bool() ? 2 : x.is_number() ? 4 : x.is_string() ? 8 : x.is_array() ? 16 : 32;
        };
        if (s.contains("const")) return kind_of(s.at("const"));
        if (s.contains("enum") && s.at("enum").is_array()) {
            unsigned k = 0;
            for (const json::value& x : s.at("enum").as_array()) k |= kind_of(x);
            return k;
        }
        if (s.contains("type")) {
            static const std::map<std::string, unsigned> kBits = {{"null", 1}, {"boolean", 2}, {"integer", 4}, {"number", 4},
                                                                  {"string", 8}, {"array", 16}, {"object", 32}};
            unsigned k = 0;
            const json::value& t = s.at("type");
            for (const json::value& x : t.is_array() ? t.as_array() : json::array{t})
                if (x.is_string() && kBits.count(std::string(x.get_string()))) k |= kBits.at(std::string(x.get_string()));
            return k ? k : kAll;
        }
        for (const char* key : {"anyOf", "oneOf"})
            if (s.contains(key) && s.at(key).is_array()) {
                unsigned k = 0;
                for (const json::value& b : s.at(key).as_array()) k |= kinds(b, p);
                return k;
            }
        return kAll;
    }

    // The values a schema allows, when it lists them (const, enum, or a
    // required property's const or enum under `property`), as canonical text.
    std::optional<std::set<std::string>> values(const json::value& v0, const std::string& property, const std::string& p) const {
        const json::value& v = followed(&v0, p);
        if (!v.is_object()) return std::nullopt;
        const json::object* s = &v.as_object();
        if (!property.empty()) {
            const json::value* req = s->if_contains("required");
            const json::value* props = s->if_contains("properties");
            const bool required = req && req->is_array() &&
                                  std::any_of(req->as_array().begin(), req->as_array().end(), [&](const json::value& r) { return r == property.c_str(); });
            if (!required || !props || !props->is_object() || !props->as_object().contains(property)) return std::nullopt;
            const json::value& sub = followed(&props->as_object().at(property), p);
            if (!sub.is_object()) return std::nullopt;
            s = &sub.as_object();
        }
        auto canonical = [](const json::value& x) { return x.is_number() ? std::to_string(x.to_number<double>()) : json::serialize(x); };
        if (s->contains("const")) return std::set<std::string>{canonical(s->at("const"))};
        if (s->contains("enum") && s->at("enum").is_array()) {
            std::set<std::string> out;
            for (const json::value& x : s->at("enum").as_array()) out.insert(canonical(x));
            return out;
        }
        return std::nullopt;
    }

    // No instance can match two of the branches: their kinds differ, or
    // their listed values do, or (objects) a required property's do.
    bool disjoint(const json::array& branches, const std::string& p) const {
        auto pairwise = [&](auto&& apart) {
            for (size_t i = 0; i < branches.size(); ++i)
                for (size_t j = i + 1; j < branches.size(); ++j)
                    if (!apart(i, j)) return false;
            return true;
        };
        auto no_common = [](const std::set<std::string>& a, const std::set<std::string>& b) {
            return std::none_of(a.begin(), a.end(), [&](const std::string& x) { return b.count(x) > 0; });
        };
        if (pairwise([&](size_t i, size_t j) {
                if ((kinds(branches[i], p) & kinds(branches[j], p)) == 0) return true;
                const auto a = values(branches[i], "", p), b = values(branches[j], "", p);
                return a && b && no_common(*a, *b);
            }))
            return true;
        // A discriminator: a property every branch requires, with values apart.
        const json::value& first = followed(&branches[0], p);
        const json::value* props = first.is_object() ? first.as_object().if_contains("properties") : nullptr;
        if (!props || !props->is_object()) return false;
        for (const auto& [name, sub] : props->as_object()) {
            const std::string d(name);
            std::vector<std::set<std::string>> sets;
            for (const json::value& b : branches) {
                auto v = values(b, d, p);
                if (!v) break;
                sets.push_back(std::move(*v));
            }
            if (sets.size() == branches.size() && pairwise([&](size_t i, size_t j) { return no_common(sets[i], sets[j]); }))
                return true;
        }
        return false;
    }

    // An integer between the bounds (exclusive ones moved in by one).
    std::string integer_range(const json::object& s, const std::string& p) {
        constexpr double kLimit = 9e15;  // integers a double holds exactly
        std::optional<int64_t> lo, hi;
        auto bound = [&](const char* key, bool lower, bool exclusive) {
            if (!s.contains(key)) return;
            const json::value& v = s.at(key);
            if (!v.is_number()) refuse(p + "/" + key, std::string("'") + key + "' must be a number");
            const double x = v.to_number<double>();
            if (!(std::fabs(x) < kLimit)) refuse(p + "/" + key, std::string("'") + key + "' beyond 9e15 is not supported");
            int64_t b = int64_t(lower ? std::ceil(x) : std::floor(x));
            if (exclusive && double(b) == x) b += lower ? 1 : -1;
            if (lower) lo = lo ? std::max(*lo, b) : b;
            else hi = hi ? std::min(*hi, b) : b;
        };
        bound("minimum", true, false);
        bound("exclusiveMinimum", true, true);
        bound("maximum", false, false);
        bound("exclusiveMaximum", false, true);
        if (lo && hi && *lo > *hi) refuse(p, "no integer lies between the bounds");
        return integer_range_gbnf(lo, hi);
    }

    // A number between the bounds, written without an exponent
    // (json_schema_numbers.h says why); the tighter of two bounds on a side.
    std::string number_range(const json::object& s, const std::string& p) {
        std::optional<NumberBound> lo, hi;
        auto bound = [&](const char* key, bool lower, bool exclusive) {
            if (!s.contains(key)) return;
            const NumberBound b{schema_decimal(s.at(key), p + "/" + key), exclusive};
            std::optional<NumberBound>& have = lower ? lo : hi;
            const int c = have ? compare(b.value, have->value) : (lower ? 1 : -1);
            if (c == 0) have->exclusive = have->exclusive || exclusive;
            else if ((c > 0) == lower) have = b;
        };
        bound("minimum", true, false);
        bound("exclusiveMinimum", true, true);
        bound("maximum", false, false);
        bound("exclusiveMaximum", false, true);
        const std::optional<std::string> g = number_range_gbnf(lo, hi);
        if (!g) refuse(p, "no number lies between the bounds");
        return *g;
    }

    // A string under `pattern` or `format`: the regex's rule (pN, its classes
    // held to plain characters after parsing: restrict_patterns), with any
    // plain characters around it where the pattern is not anchored.
    std::string patterned_string(const json::object& s, const std::string& p) {
        if (s.contains("minLength") || s.contains("maxLength"))
            refuse(p, "'pattern' or 'format' beside 'minLength' or 'maxLength' is not supported yet");
        if (s.contains("pattern") && s.contains("format")) refuse(p, "'pattern' beside 'format' is not supported yet");
        std::string re;
        if (s.contains("pattern")) {
            if (!s.at("pattern").is_string()) refuse(p + "/pattern", "'pattern' must be a string");
            re = s.at("pattern").get_string();
        } else {
            if (!s.at("format").is_string()) refuse(p + "/format", "'format' must be a string");
            re = format_pattern(std::string(s.at("format").get_string()), p + "/format");
        }
        const std::string at = s.contains("pattern") ? p + "/pattern" : p + "/format";
        const auto [start, end] = pattern_anchors(re, at);
        std::string body;
        try {
            body = regex_gbnf(re);
        } catch (const GrammarError& e) {
            refuse(at, std::string("'pattern': ") + e.what());
        }
        const std::string name = "p" + std::to_string(pattern_rules_.size());
        pattern_rules_.push_back(name);
        rules_ += name + " ::= " + body + "\n";
        const char* plain = "[^\"\\\\\\x00-\\x1F]*";
        return std::string("\"\\\"\" ") + (start ? "" : std::string(plain) + " ") + name + (end ? "" : std::string(" ") + plain) + " \"\\\"\"";
    }

    std::string array(const json::object& s, const std::string& p) {
        std::vector<std::string> prefix;
        if (s.contains("prefixItems")) {
            const json::value& pi = s.at("prefixItems");
            if (!pi.is_array()) refuse(p + "/prefixItems", "'prefixItems' must be an array");
            for (size_t i = 0; i < pi.as_array().size(); ++i)
                prefix.push_back(rule_for(pi.as_array()[i], p + "/prefixItems/" + std::to_string(i)));
        }
        std::string rest = "json-value";  // items past the prefix; "" if none may come
        if (s.contains("items")) {
            const json::value& it = s.at("items");
            rest = it.is_bool() && !it.get_bool() ? "" : rule_for(it, p + "/items");
        }
        const int64_t lo = count(s, "minItems", p, 0), hi = count(s, "maxItems", p, -1);
        if (hi >= 0 && hi < lo) refuse(p, "'maxItems' is below 'minItems'");
        // Element i (0-based) is prefix[i], then `rest`; between lo and cap of
        // them. T(i), what may follow the first i elements, is built from the
        // end: past the named positions, a run of `rest` up to the cap.
        const int64_t n = int64_t(prefix.size());
        const int64_t cap = hi >= 0 ? hi : (rest.empty() ? n : -1);
        if (rest.empty() && lo > n) refuse(p, "'minItems' needs more items than 'prefixItems' allows");
        if (cap == 0) return "\"[\" ws \"]\"";
        const auto element = [&](int64_t i) { return i < n ? prefix[size_t(i)] : rest; };
        const int64_t named = std::max<int64_t>({n, lo, 1});
        std::string next;  // T(named)
        if (!rest.empty() && (cap < 0 || cap > named))
            next = cap < 0 ? "( \",\" ws " + rest + " ws )*" : repeat("( \",\" ws " + rest + " ws )", 0, cap - named);
        for (int64_t i = named - 1; i >= 1; --i) {
            if (cap >= 0 && i >= cap) continue;  // T(i) is empty: nothing may follow
            const std::string item = "\",\" ws " + element(i) + " ws " + next;
            next = i >= lo ? "( " + item + " )?" : item;
        }
        const std::string first = element(0) + " ws " + next;
        return "\"[\" ws " + (lo >= 1 ? first : "( " + first + " )?") + " \"]\"";
    }

    std::string object(const json::object& s, const std::string& p) {
        std::vector<std::pair<std::string, std::string>> props;  // (name, value rule) in schema order
        if (s.contains("properties")) {
            const json::value& pr = s.at("properties");
            if (!pr.is_object()) refuse(p + "/properties", "'properties' must be an object");
            for (const auto& [name, sub] : pr.as_object())
                props.emplace_back(std::string(name), rule_for(sub, p + "/properties/" + std::string(name)));
        }
        std::set<std::string> required;
        if (s.contains("required")) {
            const json::value& r = s.at("required");
            if (!r.is_array()) refuse(p + "/required", "'required' must be an array of strings");
            for (const json::value& x : r.as_array()) {
                if (!x.is_string()) refuse(p + "/required", "'required' must be an array of strings");
                required.insert(std::string(x.get_string()));
            }
        }
        for (const std::string& r : required)
            if (std::none_of(props.begin(), props.end(), [&](const auto& pr) { return pr.first == r; }))
                refuse(p + "/required", "required property '" + r + "' is not in 'properties' (not supported yet)");
        const json::value* extra = s.if_contains("additionalProperties");
        const bool closed = extra && extra->is_bool() && !extra->get_bool();
        const int64_t min_p = count(s, "minProperties", p, 0), max_p = count(s, "maxProperties", p, -1);
        if (max_p >= 0 && max_p < min_p) refuse(p, "'maxProperties' is below 'minProperties'");
        // Other properties come after the named ones: a key that names none of
        // them, and a value of additionalProperties' schema.
        const size_t n = props.size();
        std::string other;
        if (!closed) {
            std::vector<std::string> names;
            for (const auto& pr : props) names.push_back(pr.first);
            const std::string v = extra ? rule_for(*extra, p + "/additionalProperties") : "json-value";
            other = (n ? key_not_in(names) : "json-string") + " ws \":\" ws " + v + " ws";
        }
        // Other keys count for one at most toward minProperties (json_schema_objects.h).
        if (!closed && min_p > int64_t(n) + 1)
            refuse(p + "/minProperties", "'minProperties' above the named properties and one other is not supported "
                                         "(other keys could repeat one, and a parser reads them as one property)");
        if (max_p >= 0 && int64_t(required.size()) > max_p) refuse(p, "'required' names more properties than 'maxProperties' allows");
        const ObjectMembers members{props, required, other, min_p, max_p};
        if (int64_t(n + 1) * (std::max<int64_t>({max_p, min_p, 1}) + 1) > 100000)
            refuse(p, "'minProperties' or 'maxProperties' over so many properties is not supported");
        const std::optional<std::string> start = object_members_gbnf(members, "o" + std::to_string(objects_++), rules_);
        if (!start) refuse(p, "no object has the properties that 'required', 'minProperties' and 'maxProperties' ask for");
        return "\"{\" ws " + *start + " \"}\"";
    }

    std::string pointer_of(const json::value& ref) const { return ref.is_string() ? std::string(ref.get_string()).substr(1) : ""; }

    const json::value& resolve(const json::value& ref, const std::string& p) const {
        if (!ref.is_string()) refuse(p + "/$ref", "'$ref' must be a string");
        const std::string r(ref.get_string());
        if (r.empty() || r[0] != '#') refuse(p + "/$ref", "only references inside the schema ('#...') are supported");
        const json::value* v = &root_;
        size_t i = 1;
        while (i < r.size()) {
            if (r[i] != '/') refuse(p + "/$ref", "'" + r + "' is not a JSON pointer");
            const size_t next = r.find('/', i + 1);
            std::string key = r.substr(i + 1, next == std::string::npos ? std::string::npos : next - i - 1);
            for (size_t at; (at = key.find("~1")) != std::string::npos;) key.replace(at, 2, "/");
            for (size_t at; (at = key.find("~0")) != std::string::npos;) key.replace(at, 2, "~");
            if (v->is_object() && v->as_object().contains(key)) {
                v = &v->as_object().at(key);
            } else if (v->is_array() && !key.empty() && std::all_of(key.begin(), key.end(), ::isdigit) &&
                       std::stoul(key) < v->as_array().size()) {
                v = &v->as_array()[std::stoul(key)];
            } else {
                refuse(p + "/$ref", "'" + r + "' points at nothing");
            }
            i = next == std::string::npos ? r.size() : next;
        }
        return *v;
    }

    const json::value& root_;
    const JsonSchemaOptions options_;
    std::map<const json::value*, std::string> names_;
    std::string rules_;
    int objects_ = 0;
    int keys_ = 0;
    std::deque<json::value> merged_;
    std::map<std::string, std::string> merged_names_;  // a merge's rule by the merged schema's text  // allOf's merged schemas (rule_for keys rules by address)

public:
    std::vector<std::string> pattern_rules_;  // pN: their classes are held to plain characters
};

}  // namespace

Grammar json_schema_grammar(const json::value& schema, std::string_view wrapper, std::string_view schema_rule,
                            const JsonSchemaOptions& options) {
    Compiler compiler(schema, options);
    const std::string gbnf = std::string(wrapper) + compiler.compile(schema_rule);
    Grammar g;
    try {
        g = parse_gbnf(gbnf);
    } catch (const GrammarError& e) {
        throw GrammarError(0, 0, std::string("the schema compiles to a grammar that fails: ") + e.what());
    }
    restrict_patterns(g, compiler.pattern_rules_);
    return g;
}

Grammar json_schema_grammar(const json::value& schema, const JsonSchemaOptions& options) {
    return json_schema_grammar(schema, "", "root", options);
}

}  // namespace minfer::grammar
