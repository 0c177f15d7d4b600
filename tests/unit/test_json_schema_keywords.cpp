// JSON Schema keywords beyond the first ones (test_grammar.cpp has those):
// bounds on numbers, minProperties and maxProperties, $ref beside other
// keywords, and compact output (no whitespace between tokens).
#include <doctest/doctest.h>

#include <boost/json.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/grammar/earley.h"
#include "engine/grammar/gbnf.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/json_schema_numbers.h"

using namespace minfer::grammar;

namespace {

bool accepts(const Grammar& g, const std::string& text) {
    // (exponents beyond one digit are refused by the grammar: json_schema_numbers.h)
    Recognizer r(g);
    return r.feed(text) && r.accepting();
}

Grammar compile(std::string_view schema, bool compact = false) {
    return json_schema_grammar(boost::json::parse(schema), JsonSchemaOptions{.compact = compact});
}

struct SchemaCase {
    const char* schema;
    std::vector<std::string> accept, reject;
};

void check(const SchemaCase& c, bool compact = false) {
    CAPTURE(std::string(c.schema));
    const Grammar g = compile(c.schema, compact);
    for (const auto& t : c.accept) {
        CAPTURE(t);
        CHECK(accepts(g, t));
    }
    for (const auto& t : c.reject) {
        CAPTURE(t);
        CHECK_FALSE(accepts(g, t));
    }
}

void check_refused(const char* schema, const char* says) {
    CAPTURE(std::string(schema));
    CHECK_THROWS_WITH_AS(compile(schema), doctest::Contains(says), GrammarError);
}

// A decimal with up to 4 fraction digits as an integer count of 1e-4.
int64_t scaled(int64_t whole, int64_t frac4, bool negative) { return (negative ? -1 : 1) * (whole * 10000 + frac4); }

// How JSON may write the number v/1e4: with or without a fraction, with trailing zeros, "-0" for zero.
std::string written(int64_t v, std::mt19937_64& rng) {
    const bool negative = v < 0 || (v == 0 && rng() % 3 == 0);
    const uint64_t m = uint64_t(v < 0 ? -v : v);
    std::string s = (negative ? "-" : "") + std::to_string(m / 10000);
    std::string frac = std::to_string(m % 10000);
    frac.insert(0, 4 - frac.size(), '0');
    while (!frac.empty() && frac.back() == '0' && rng() % 2) frac.pop_back();
    if (frac.find_first_not_of('0') != std::string::npos || (!frac.empty() && rng() % 2)) s += "." + frac;
    if (rng() % 3) return s;
    // As m×10^e: the point moved e places left, e from -3 to 3.
    const int e = int(rng() % 7) - 3;
    const size_t sign = negative ? 1 : 0;
    std::string digits = s.substr(sign);
    size_t dot = digits.find('.');
    if (dot == std::string::npos) dot = digits.size();
    else digits.erase(dot, 1);
    int point = int(dot) - e;
    if (point <= 0) digits.insert(0, size_t(1 - point), '0'), point = 1;
    if (point > int(digits.size())) digits.append(size_t(point) - digits.size(), '0');
    std::string whole = digits.substr(0, size_t(point)), fraction = digits.substr(size_t(point));
    whole.erase(0, std::min(whole.find_first_not_of('0'), whole.size() - 1));
    const char* exponents[] = {"e", "E", "e+", "E-0"};
    std::string exp = e < 0 ? "e-" + std::to_string(-e) : std::string(exponents[rng() % 3]) + std::to_string(e);
    if (e == 0 && rng() % 2) exp = "E-00";
    return s.substr(0, sign) + whole + (fraction.empty() ? "" : "." + fraction) + exp;
}

}  // namespace

TEST_CASE("number ranges: every decimal between the bounds and no other, on random bounds") {
    std::mt19937_64 rng(23);
    for (int trial = 0; trial < 300; ++trial) {
        const int64_t scale = trial % 3 == 0 ? 3 : trial % 3 == 1 ? 40 : 3000;  // in whole units
        auto random_value = [&] {  // bounds keep to 0..3 decimals, sometimes whole
            const int64_t whole = int64_t(rng() % uint64_t(scale));
            const int64_t frac = rng() % 3 == 0 ? 0 : int64_t(rng() % 1000) * 10;
            return scaled(whole, frac, rng() % 2 == 0);
        };
        int64_t a = random_value(), b = random_value();
        if (a > b) std::swap(a, b);
        const bool open_lo = trial % 7 == 0, open_hi = trial % 11 == 0;
        const bool ex_lo = rng() % 2 == 0, ex_hi = rng() % 2 == 0;
        if (!open_lo && !open_hi && a == b && (ex_lo || ex_hi)) continue;  // empty: refused (below)
        auto bound = [&](int64_t v, bool exclusive) {
            Decimal d;
            const uint64_t m = uint64_t(v < 0 ? -v : v);
            d.negative = v < 0;
            d.whole = std::to_string(m / 10000);
            d.fraction = std::to_string(m % 10000);
            d.fraction.insert(0, 4 - d.fraction.size(), '0');
            d.fraction.erase(d.fraction.find_last_not_of('0') + 1);
            return NumberBound{d, exclusive};
        };
        CAPTURE(a);
        CAPTURE(b);
        CAPTURE(ex_lo);
        CAPTURE(ex_hi);
        const std::optional<std::string> body = number_range_gbnf(open_lo ? std::nullopt : std::optional(bound(a, ex_lo)),
                                                                  open_hi ? std::nullopt : std::optional(bound(b, ex_hi)));
        REQUIRE(body);
        const Grammar g = parse_gbnf("root ::= " + *body);
        auto in = [&](int64_t x) {
            return (open_lo || (ex_lo ? x > a : x >= a)) && (open_hi || (ex_hi ? x < b : x <= b));
        };
        std::vector<int64_t> xs = {a, b, a - 1, a + 1, b - 1, b + 1, 0, a - 10, b + 10};
        for (int k = 0; k < 40; ++k) xs.push_back(int64_t(rng() % uint64_t(4 * scale * 10000)) - 2 * scale * 10000);
        for (int k = 0; k < 10; ++k) xs.push_back(a + int64_t(rng() % 20001) - 10000);
        for (const int64_t x : xs) {
            const std::string text = written(x, rng);
            CAPTURE(text);
            CHECK(accepts(g, text) == in(x));
        }
        CHECK_FALSE(accepts(g, "00"));
        CHECK_FALSE(accepts(g, "1."));
        CHECK_FALSE(accepts(g, "1e"));
        CHECK_FALSE(accepts(g, "1e10"));  // out of range, or beyond the exponents taken (json_schema_numbers.h says why)
    }
    CHECK_FALSE(number_range_gbnf(NumberBound{Decimal{false, "1", "5"}, false}, NumberBound{Decimal{false, "1", "5"}, true}));
    CHECK_FALSE(number_range_gbnf(NumberBound{Decimal{false, "2", ""}, false}, NumberBound{Decimal{false, "1", "99"}, false}));
}

TEST_CASE("json schema: bounds on numbers are exact in decimal, written without an exponent") {
    const SchemaCase cases[] = {
        {R"({"type": "number", "minimum": 1.1})", {"1.1", "1.10", "2.6", "100", "1.1000001", "1.1e0", "2.6E0", "11E-1", "0.011e+2", "1E+09"},
         {"1.09", "0.6", "-1.1", "1", "1.09E0", "10E-1", "1.1e-1"}},
        {R"({"type": "number", "exclusiveMinimum": 1.1})", {"1.2", "1.1001", "2"}, {"1.1", "1.10", "1.0999", "0.6"}},
        {R"({"type": "number", "maximum": 3.0})", {"3", "3.0", "3.000", "-5.5", "2.99999", "3E0", "-1E+9"}, {"3.01", "3.5", "30", "3.0001", "3.01E0", "1e1"}},
        {R"({"minimum": -2})", {"-2.0", "-1", "0", "-1.9999", "7.5"}, {"-2.0001", "-3"}},
        {R"({"type": "number", "exclusiveMinimum": 0, "maximum": 0.5})", {"0.5", "0.25", "0.0001", "0.50"},
         {"0", "-0", "0.0", "-0.0", "0.5000001", "0.6", "-0.1"}},
        {R"({"type": "number", "minimum": -0.5, "exclusiveMaximum": 0})", {"-0.5", "-0.25", "-0.0001"}, {"0", "-0", "0.0", "-0.51", "0.1"}},
        {R"({"type": "number", "minimum": 0, "maximum": 0})", {"0", "-0", "0.000", "-0.0"}, {"0.001", "-0.001", "1"}},
        {R"({"type": "number", "minimum": 2, "exclusiveMinimum": 2, "maximum": 5, "exclusiveMaximum": 4.5})",
         {"2.001", "4.4999"}, {"2", "4.5", "5"}},
        {R"({"type": ["integer", "number"], "minimum": 1.5})", {"2", "1.5", "1.75"}, {"1", "1.4"}},
        {R"({"type": "integer", "minimum": 1.5})", {"2", "3"}, {"1", "1.5", "2.5"}},
    };
    for (const auto& c : cases) check(c);
    check_refused(R"({"type": "number", "minimum": 1, "exclusiveMaximum": 1})", "at '#': no number lies between the bounds");
    check_refused(R"({"type": "number", "maximum": 1e300})", "at '#/maximum': a bound of 9e15 or more");
    check_refused(R"({"type": "number", "minimum": "1"})", "at '#/minimum': a bound must be a number");
}

TEST_CASE("json schema: minProperties and maxProperties count the properties as they are written") {
    const SchemaCase cases[] = {
        {R"({"minProperties": 1})", {R"({"a": 1})", R"({"a": 1, "b": 2})"}, {"{}", "{ }"}},
        {R"({"maxProperties": 2})", {"{}", R"({"a": 1})", R"({"a": 1, "b": 2})"}, {R"({"a": 1, "b": 2, "c": 3})"}},
        {R"({"maxProperties": 0})", {"{}"}, {R"({"a": 1})"}},
        {R"({"maxProperties": 1.0})", {"{}", R"({"a": 1})"}, {R"({"a": 1, "b": 2})"}},
        {R"({"type": "object", "properties": {"a": {}, "b": {}, "c": {}}, "additionalProperties": false, "minProperties": 2, "maxProperties": 2})",
         {R"({"a": 1, "b": 2})", R"({"a": 1, "c": 1})", R"({"b": 1, "c": 1})"}, {R"({"a": 1})", R"({"a": 1, "b": 1, "c": 1})", "{}", R"({"c": 1})"}},
        {R"({"properties": {"a": {}, "b": {}}, "required": ["a"], "minProperties": 2})",
         {R"({"a": 1, "b": 2})", R"({"a": 1, "x": 2})", R"({"a": 1, "b": 2, "x": 3, "y": 4})"}, {R"({"a": 1})", R"({"b": 1, "x": 1})"}},
        {R"({"properties": {"a": {}}, "additionalProperties": {"type": "integer"}, "maxProperties": 2})",
         {R"({"a": 1, "x": 2})", R"({"x": 1, "y": 2})", "{}"}, {R"({"a": 1, "x": 2, "y": 3})", R"({"x": 1, "y": 2, "z": 3})", R"({"x": "s"})"}},
        {R"({"properties": {"a": {}, "b": {}}, "minProperties": 3})", {R"({"a": 1, "b": 2, "c": 3})", R"({"a": 1, "b": 2, "c": 3, "d": 4})"},
         {R"({"a": 1, "b": 2})", R"({"a": 1, "c": 2, "d": 3})"}},  // (the last: two other keys, which could repeat one)
    };
    for (const auto& c : cases) check(c);
    check_refused(R"({"minProperties": 2})", "at '#/minProperties': 'minProperties' above the named properties and one other");
    check_refused(R"({"properties": {"a": {}}, "required": ["a"], "maxProperties": 0})", "'required' names more properties than 'maxProperties'");
    check_refused(R"({"minProperties": 2, "maxProperties": 1})", "at '#': 'maxProperties' is below 'minProperties'");
    check_refused(R"({"properties": {"a": {}}, "additionalProperties": false, "minProperties": 2})", "no object has the properties");
}

TEST_CASE("json schema: $ref beside other keywords applies both (draft 2020-12), merged where exact") {
    const SchemaCase cases[] = {
        {R"({"$defs": {"reffed": {"type": "array"}}, "properties": {"foo": {"$ref": "#/$defs/reffed", "maxItems": 2}}})",
         {R"({"foo": []})", R"({"foo": [1, 2]})"}, {R"({"foo": [1, 2, 3]})", R"({"foo": "x"})"}},
        {R"({"$defs": {"a": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}},
             "$ref": "#/$defs/a", "properties": {"y": {"type": "string"}}, "required": ["y"]})",
         {R"({"x": 1, "y": "s"})"}, {R"({"x": 1})", R"({"y": "s"})", R"({"x": 1, "y": 2})"}},
        {R"({"$defs": {"n": {"type": "integer", "minimum": 0, "maximum": 50}}, "$ref": "#/$defs/n", "maximum": 10})",
         {"0", "10"}, {"11", "-1", "1.5"}},
        {R"({"$defs": {"node": {"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#/$defs/node", "maxProperties": 1}, {"type": "null"}]}},
             "required": ["next"]}}, "$ref": "#/$defs/node", "description": "a list"})",
         {R"({"next": null})", R"({"next": {"next": null}})", R"({"next": null, "x": 1})"}, {R"({"next": {"next": null, "x": 1}})", "{}"}},
        {R"({"allOf": [{"type": "string"}], "maxLength": 2})", {R"("ab")"}, {R"("abc")", "1"}},
        {R"({"allOf": [{"type": "string"}, {"maxLength": 3}, {"maxLength": 2}]})", {R"("ab")"}, {R"("abc")"}},
        {R"({"allOf": [{"type": ["integer", "string"]}, {"type": "number"}]})", {"1"}, {R"("a")", "1.5"}},
        {R"({"$defs": {"e": {"enum": [1, "a", null]}}, "$ref": "#/$defs/e", "type": "string"})", {R"("a")"}, {"1", "null"}},
    };
    for (const auto& c : cases) check(c);
    check_refused(R"({"$defs": {"a": {"properties": {"x": {}}}}, "$ref": "#/$defs/a", "additionalProperties": false})",
                  "at '#': 'additionalProperties' beside another schema's 'properties'");
    check_refused(R"({"$defs": {"a": {"items": false}}, "$ref": "#/$defs/a", "prefixItems": [{}]})", "'items' beside another schema's 'prefixItems'");
    check_refused(R"({"$defs": {"a": {"pattern": "a"}}, "$ref": "#/$defs/a", "pattern": "b"})", "'pattern' in two of the schemas");
    check_refused(R"({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"})", "nested too deep");
    check_refused(R"({"$defs": {"a": {"type": "string"}}, "$ref": "#/$defs/a", "type": "integer"})", "no type in common");
    check_refused(R"({"$defs": {"a": {"properties": {"x": {"type": "string"}}}}, "$ref": "#/$defs/a", "properties": {"x": {}}})",
                  "naming property 'x' twice");
    check_refused(R"({"const": 1, "type": "string"})", "no value listed is of the 'type'");
    check_refused(R"({"const": 1, "minimum": 5})", "'const' beside 'minimum'");
}

TEST_CASE("json schema: compact output has no whitespace between tokens, and strings keep theirs") {
    const char* schema = R"({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}, "b": {"type": "string"},
                             "c": {"type": "object", "additionalProperties": {"type": "number", "minimum": 0}}}})";
    const Grammar compact = compile(schema, true), flexible = compile(schema);
    for (const char* t : {R"({"a":[1,2],"b":"x y"})", "{}", R"({"c":{"k":1.5},"x":[1,{"y":null}]})", R"({"b":" \n "})"}) {
        CAPTURE(std::string(t));
        CHECK(accepts(compact, t));
    }
    // Between any two tokens, in the named properties and in free JSON values alike.
    for (const char* t : {R"({"a": [1,2]})", R"({"a":[1, 2]})", R"({ "a":[1]})", R"({"a":[1] })", "{\"b\":\"x\",\n\"c\":{}}",
                          R"({"x":[ 1]})", R"({"x":{"y" :1}})", R"({"c":{"k": 1}})"}) {
        CAPTURE(std::string(t));
        CHECK_FALSE(accepts(compact, t));
        CHECK(accepts(flexible, t));  // flexible by default
    }
}

TEST_CASE("json schema: compact and flexible compile the same test-suite schemas, and accept its compact instances alike") {
    namespace fs = std::filesystem;
    const fs::path dir = fs::path(MINFER_SHARED_DIR) / "json-schema-test-suite/tests/draft2020-12";
    int compiled = 0;
    for (const auto& entry : fs::directory_iterator(dir)) {
        if (entry.path().extension() != ".json") continue;
        std::ifstream in(entry.path());
        std::stringstream text;
        text << in.rdbuf();
        const boost::json::value file = boost::json::parse(text.str());
        for (const auto& group : file.as_array()) {
            std::optional<Grammar> flexible, compact;
            try {
                flexible = json_schema_grammar(group.at("schema"));
            } catch (const GrammarError&) {
            }
            try {
                compact = json_schema_grammar(group.at("schema"), JsonSchemaOptions{.compact = true});
            } catch (const GrammarError&) {
            }
            CAPTURE(boost::json::serialize(group.at("schema")));
            REQUIRE(flexible.has_value() == compact.has_value());
            if (!compact) continue;
            ++compiled;
            for (const auto& test : group.at("tests").as_array()) {
                const std::string instance = boost::json::serialize(test.at("data"));  // compact
                CAPTURE(instance);
                const bool ok = accepts(*compact, instance);
                CHECK(ok == accepts(*flexible, instance));
                if (!test.at("valid").as_bool()) CHECK_FALSE(ok);
            }
        }
    }
    CHECK(compiled > 120);
}
