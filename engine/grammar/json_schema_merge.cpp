#include "engine/grammar/json_schema_merge.h"

#include <algorithm>
#include <map>

#include "engine/grammar/json_schema_numbers.h"
#include "engine/grammar/json_schema_strings.h"

namespace minfer::grammar {

namespace json = boost::json;

const std::set<std::string> kSchemaAnnotations = {"title", "description", "default", "examples", "$schema", "$id",
                                                  "$comment", "$defs", "definitions", "deprecated", "readOnly", "writeOnly"};

namespace {

std::vector<std::string> types_of(const json::value& t, const std::string& at) {
    std::vector<std::string> out;
    for (const json::value& x : t.is_array() ? t.as_array() : json::array{t}) {
        if (!x.is_string()) schema_error(at + "/type", "'type' must be a string or an array of strings");
        out.emplace_back(x.get_string());
    }
    return out;
}

// The types both lists allow (an integer is a number).
json::value intersect_types(const json::value& a, const json::value& b, const std::string& at) {
    const std::vector<std::string> ta = types_of(a, at), tb = types_of(b, at);
    json::array out;
    auto has = [](const std::vector<std::string>& v, const char* t) { return std::find(v.begin(), v.end(), t) != v.end(); };
    for (const std::string& t : ta) {
        std::string keep;
        if (has(tb, t.c_str())) keep = t;
        else if ((t == "integer" && has(tb, "number")) || (t == "number" && has(tb, "integer"))) keep = "integer";
        if (!keep.empty() && std::find(out.begin(), out.end(), json::value(keep)) == out.end()) out.emplace_back(keep);
    }
    if (out.empty()) schema_error(at, "the schemas it joins have no type in common: it matches nothing");
    return out.size() == 1 ? json::value(out[0]) : json::value(out);
}

bool is_count(const json::value& v) { return v.is_int64() || v.is_uint64(); }

}  // namespace

json::object merge_schemas(const std::vector<const json::value*>& parts, const std::string& at) {
    static const std::set<std::string> kLower = {"minItems", "minLength", "minProperties"};
    static const std::set<std::string> kUpper = {"maxItems", "maxLength", "maxProperties"};
    static const std::set<std::string> kBounds = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    json::object out;
    json::object props;
    json::array required;
    std::map<std::string, std::set<size_t>> from;  // keyword -> the parts that have it
    for (size_t i = 0; i < parts.size(); ++i) {
        if (!parts[i]->is_object()) schema_error(at, "a schema must be an object or a boolean");
        for (const auto& [k, v] : parts[i]->as_object()) {
            const std::string key(k);
            if (kSchemaAnnotations.count(key)) continue;
            from[key].insert(i);
            if (key == "properties" && v.is_object()) {
                for (const auto& [name, sub] : v.as_object()) {
                    if (props.contains(name) && props.at(name) != sub)
                        schema_error(at, "'allOf' or '$ref' naming property '" + std::string(name) +
                                             "' twice (with different schemas) is not supported yet");
                    props[name] = sub;
                }
                continue;
            }
            if (key == "required" && v.is_array()) {
                for (const json::value& r : v.as_array())
                    if (std::find(required.begin(), required.end(), r) == required.end()) required.push_back(r);
                continue;
            }
            json::value* have = out.if_contains(key);
            if (!have) {
                out[key] = v;
            } else if (*have == v) {
            } else if (key == "type") {
                *have = intersect_types(*have, v, at);
            } else if ((kLower.count(key) || kUpper.count(key)) && is_count(*have) && is_count(v)) {
                const bool lower = kLower.count(key) > 0;
                if ((v.to_number<int64_t>() > have->to_number<int64_t>()) == lower) *have = v;
            } else if (kBounds.count(key) && have->is_number() && v.is_number()) {
                const int c = compare(schema_decimal(v, at + "/" + key), schema_decimal(*have, at + "/" + key));
                const bool lower = key == "minimum" || key == "exclusiveMinimum";
                if ((c > 0) == lower && c != 0) *have = v;
            } else {
                schema_error(at, "'" + key + "' in two of the schemas 'allOf' or '$ref' joins, with different values, is not supported yet");
            }
        }
    }
    // A keyword that reads a neighbour must have it from its own part.
    auto one_part = [&](const char* key, const char* neighbour) {
        if (!from.count(key) || !from.count(neighbour)) return;
        std::set<size_t> both = from.at(key);
        both.insert(from.at(neighbour).begin(), from.at(neighbour).end());
        if (both.size() > 1)
            schema_error(at, std::string("'") + key + "' beside another schema's '" + neighbour +
                                 "' ('allOf' or '$ref' with siblings) is not supported yet");
    };
    one_part("additionalProperties", "properties");
    one_part("items", "prefixItems");
    if (!props.empty()) out["properties"] = std::move(props);
    if (!required.empty()) out["required"] = std::move(required);
    return out;
}

}  // namespace minfer::grammar
