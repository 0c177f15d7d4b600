// The grammar engine's front end and reference matcher: GBNF compiled to a
// Grammar (engine/grammar/gbnf.h), recognized byte by byte by Earley
// (engine/grammar/earley.h). Against ../shared/grammars (grammars written
// outside this project, with texts each must accept or reject), and errors
// that say where.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <boost/json.hpp>
#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/grammar/builtin.h"
#include "engine/grammar/constraint.h"
#include "engine/grammar/earley.h"
#include "engine/grammar/gbnf.h"
#include "engine/grammar/integer_range.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/mask_cache.h"
#include "engine/grammar/regex.h"
#include "engine/grammar/token_mask.h"
#include "engine/gguf/gguf.h"
#include "engine/text/tokenizer.h"

using namespace minfer::grammar;

namespace {

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE_MESSAGE(in, "cannot read " << path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

bool matches(const Grammar& g, const std::string& text) {
    Recognizer r(g);
    return r.feed(text) && r.accepting();
}

// A grammar's source (GBNF or a pattern), the texts it must match and those it must not.
struct Case {
    const char* source;
    std::vector<std::string> accept, reject;
};

void check_cases(const Case& c, Grammar (*compile)(std::string_view)) {
    CAPTURE(std::string(c.source));
    const Grammar g = compile(c.source);
    for (const auto& t : c.accept) {
        CAPTURE(t);
        CHECK(matches(g, t));
    }
    for (const auto& t : c.reject) {
        CAPTURE(t);
        CHECK_FALSE(matches(g, t));
    }
}

}  // namespace

TEST_CASE("gbnf: every grammar in ../shared/grammars accepts and rejects its cases") {
    const std::string dir = std::string(MINFER_SHARED_DIR) + "/grammars/";
    const auto cases = boost::json::parse(read_file(dir + "cases.json")).as_object();
    int checked = 0;
    for (const auto& [file, c] : cases) {
        CAPTURE(std::string(file));
        const Grammar g = parse_gbnf(read_file(dir + std::string(file)));
        for (const auto& text : c.at("accept").as_array()) {
            CAPTURE(std::string(text.as_string()));
            CHECK(matches(g, std::string(text.as_string())));
            ++checked;
        }
        for (const auto& text : c.at("reject").as_array()) {
            CAPTURE(std::string(text.as_string()));
            CHECK_FALSE(matches(g, std::string(text.as_string())));
            ++checked;
        }
    }
    CHECK(checked > 30);
    MESSAGE(checked << " cases");
}

TEST_CASE("gbnf: repetition, classes, escapes and recursion") {
    const Case cases[] = {
        {R"(root ::= "a"{2,4})", {"aa", "aaa", "aaaa"}, {"", "a", "aaaaa"}},
        {R"(root ::= "ab"{2})", {"abab"}, {"ab", "ababab", "aabb"}},
        {R"(root ::= [a-c]{1,} "!")", {"a!", "abcabc!"}, {"!", "abd!"}},
        {R"(root ::= [^a-z\n]+)", {"ABC", "12 3", "é☃"}, {"a", "A\n", ""}},
        {R"(root ::= "\x41\u00e9\U0001F600\t\"")", {"Aé😀\t\""}, {"Ae😀\t\""}},
        {R"(root ::= . "x")", {"ax", "☃x", "😀x"}, {"x", "aax"}},
        // Left recursion and nullable rules, which a pushdown matcher without Earley's sets cannot take.
        {"root ::= expr\nexpr ::= expr \"+\" num | num\nnum ::= [0-9]+", {"1", "1+2+33"}, {"+1", "1+", "1++2"}},
        {"root ::= a b \"x\"\na ::= \"\" | \"a\"\nb ::= (\"b\")?", {"x", "ax", "bx", "abx"}, {"bax", "aax"}},
        {"root ::= (\n  \"a\" |\n  \"b\"\n)+ # a comment\n", {"abba"}, {"abc"}},
    };
    for (const auto& c : cases) check_cases(c, parse_gbnf);
}

TEST_CASE("earley: a byte is refused as soon as no sentence can follow, and rollback undoes bytes") {
    const Grammar g = parse_gbnf(R"(root ::= "{" [a-z]* "}" | "é" "!")");
    Recognizer r(g);
    CHECK(r.feed("{ab"));
    CHECK_FALSE(r.accepting());
    CHECK_FALSE(r.feed(uint8_t('1')));  // refused, nothing changed
    CHECK(r.size() == 3);
    CHECK(r.feed(uint8_t('}')));
    CHECK(r.accepting());
    CHECK_FALSE(r.feed(uint8_t('}')));
    r.rollback(4);
    CHECK(r.size() == 0);
    // Half a character: é is C3 A9; C3 A8 (è) is not in the grammar.
    CHECK(r.feed(uint8_t(0xC3)));
    CHECK_FALSE(r.accepting());
    CHECK_FALSE(r.feed(uint8_t(0xA8)));
    CHECK(r.feed(uint8_t(0xA9)));
    CHECK(r.feed(uint8_t('!')));
    CHECK(r.accepting());
    r.rollback(2);  // back to half of é
    CHECK(r.size() == 1);
    CHECK(r.feed(std::string("\xA9!")));
    CHECK(r.accepting());
    // Bytes that are not UTF-8 never match: a lone continuation, an overlong lead.
    Recognizer any(parse_gbnf("root ::= .*"));
    CHECK_FALSE(any.feed(uint8_t(0x80)));
    CHECK_FALSE(any.feed(uint8_t(0xC0)));
    Recognizer copy = r;  // a fork goes on by itself
    copy.rollback(1);
    CHECK(copy.size() + 1 == r.size());
    CHECK(r.accepting());
}

TEST_CASE("earley: next_bytes holds every byte feed takes, at every prefix of the shared grammars' texts") {
    const std::string dir = std::string(MINFER_SHARED_DIR) + "/grammars/";
    const auto cases = boost::json::parse(read_file(dir + "cases.json")).as_object();
    int prefixes = 0, taken = 0, refused_in_set = 0;
    for (const auto& [file_name, c] : cases) {
        const Grammar g = parse_gbnf(read_file(dir + std::string(file_name)));
        for (const char* kind : {"accept", "reject"})
            for (const auto& t : c.at(kind).as_array()) {
                const std::string text(t.as_string());
                Recognizer r(g);
                for (size_t i = 0; i <= text.size(); ++i) {
                    const std::array<uint64_t, 4> next = r.next_bytes();
                    ++prefixes;
                    for (int b = 0; b < 256; ++b) {
                        const bool listed = next[size_t(b) / 64] >> (b % 64) & 1u;
                        if (r.feed(uint8_t(b))) {
                            ++taken;
                            CAPTURE(std::string(file_name));
                            CAPTURE(text.substr(0, i));
                            CAPTURE(b);
                            CHECK(listed);
                            r.rollback(1);
                        } else {
                            refused_in_set += listed;
                        }
                    }
                    if (i == text.size() || !r.feed(uint8_t(text[i]))) break;
                }
            }
    }
    CHECK(prefixes > 200);
    // A superset, but not everything: the walks it prunes depend on that.
    CHECK(refused_in_set < taken);
    MESSAGE(prefixes << " prefixes, " << taken << " bytes taken, " << refused_in_set << " listed and refused");
}

TEST_CASE("gbnf: groups nested too deep are an error, not a stack overflow") {
    const std::string deep = "root ::= " + std::string(100000, '(') + "\"a\"" + std::string(100000, ')');
    CHECK_THROWS_WITH_AS(parse_gbnf(deep), doctest::Contains("nested deeper"), GrammarError);
    const std::string fine = "root ::= " + std::string(150, '(') + "\"a\"" + std::string(150, ')');
    CHECK(matches(parse_gbnf(fine), "a"));
    // A group is one symbol, so nested counts stay small; a long string copied many times does not.
    CHECK_THROWS_WITH_AS(parse_gbnf("root ::= \"" + std::string(120, 'a') + "\"{9000}"),
                         doctest::Contains("line 1, column 132: the repetitions expand to more than"), GrammarError);
}

TEST_CASE("gbnf: a bad grammar names the line and column of the problem") {
    struct Case {
        const char* grammar;
        int line, column;
        const char* says;
    };
    const Case cases[] = {
        {"root ::= \"a\" b", 1, 14, "undefined rule 'b'"},
        {"root ::= \"a\"\nroot ::= \"b\"", 2, 1, "defined twice"},
        {"root ::= \"abc", 1, 14, "unterminated string"},
        {"root ::= [a-", 1, 10, "unterminated character class"},
        {"root ::= [z-a]", 1, 10, "ends before it starts"},
        {"root = \"a\"", 1, 6, "expected '::='"},
        {"root ::= (\"a\"", 1, 14, "expected ')'"},
        {"root ::= \"a\"{3,1}", 1, 13, "below its minimum"},
        {"root ::= *", 1, 10, "unexpected '*'"},
        {"root ::= \"\\q\"", 1, 11, "unknown escape"},
        {"root ::= \"\\xZZ\"", 1, 11, "hex digits"},
        {"x ::= \"a\"", 0, 0, "no 'root' rule"},
    };
    for (const auto& c : cases) {
        CAPTURE(std::string(c.grammar));
        try {
            parse_gbnf(c.grammar);
            FAIL("compiled");
        } catch (const GrammarError& e) {
            CHECK(e.line() == c.line);
            CHECK(e.column() == c.column);
            CHECK(std::string(e.what()).find(c.says) != std::string::npos);
        }
    }
}

TEST_CASE("token mask: the trie walk allows exactly the tokens the recognizer takes whole") {
    // A small vocabulary with shared prefixes, multi-byte characters split
    // across tokens, and an empty (control) token.
    const std::vector<std::string> vocab = {"{", "}", "{}", "a", "ab", "abc", "\xC3", "\xA9", "\xC3\xA9", "", "\"", "x}"};
    const TokenTrie trie(vocab);
    const Grammar g = parse_gbnf(R"(root ::= "{" ([a-b]+ | "é")? "}")");
    Recognizer r(g);
    std::vector<uint32_t> mask;
    auto allowed = [&] {
        trie.allowed(r, mask);
        std::vector<std::string> out;
        for (size_t t = 0; t < vocab.size(); ++t)
            if (mask[t / 32] >> (t % 32) & 1u) out.push_back(vocab[t]);
        return out;
    };
    CHECK(allowed() == std::vector<std::string>{"{", "{}"});
    CHECK(r.size() == 0);  // left as it was
    r.feed("{");
    CHECK(allowed() == std::vector<std::string>{"}", "a", "ab", "\xC3", "\xC3\xA9"});
    r.feed("\xC3");
    CHECK(allowed() == std::vector<std::string>{"\xA9"});
}

TEST_CASE("token mask: on real vocabularies, each grammar's texts go through the masks token by token") {
    const std::string dir = std::string(MINFER_SHARED_DIR) + "/grammars/";
    const auto cases = boost::json::parse(read_file(dir + "cases.json")).as_object();
    // Byte-level BPE: a text encodes alone as it would inside an output (a SentencePiece
    // encoder would put its space in front of the first piece).
    for (const std::string name : {"gpt-2", "deepseek-coder"}) {
        CAPTURE(std::string(name));
        const auto file = minfer::GGUFFile::open(std::string(MINFER_SHARED_DIR) + "/vocab/ggml-vocab-" + name + ".gguf");
        const auto tok = minfer::Tokenizer::from_gguf(file);
        std::vector<std::string> bytes(size_t(tok->vocab_size()));
        for (int32_t i = 0; i < tok->vocab_size(); ++i) {
            const auto type = tok->token_type(i);
            if (type != minfer::TokenType::Control && type != minfer::TokenType::Unused) bytes[size_t(i)] = tok->token_to_piece(i);
        }
        const TokenTrie trie(bytes);
        std::vector<uint32_t> mask;
        int tokens_checked = 0, brute_checked = 0;
        std::vector<double> mask_us;  // the plain walk's time per mask (printed, not asserted)
        for (const auto& [file_name, c] : cases) {
            CAPTURE(std::string(file_name));
            const Grammar g = parse_gbnf(read_file(dir + std::string(file_name)));
            for (const char* kind : {"accept", "reject"}) {
                for (const auto& text : c.at(kind).as_array()) {
                    const std::string t(text.as_string());
                    CAPTURE(t);
                    Recognizer r(g);
                    bool ok = true;
                    for (const int32_t id : tok->encode(t, false)) {
                        const auto t0 = std::chrono::steady_clock::now();
                        trie.allowed(r, mask);
                        mask_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
                        const bool bit = mask[size_t(id) / 32] >> (id % 32) & 1u;
                        // The walk says what feeding the token's bytes says.
                        Recognizer probe = r;
                        CHECK(bit == probe.feed(bytes[size_t(id)]));
                        ++tokens_checked;
                        if (!bit) {
                            ok = false;
                            break;
                        }
                        r.feed(bytes[size_t(id)]);
                    }
                    ok = ok && r.accepting();
                    CHECK(ok == (std::string(kind) == "accept"));
                    // Now and then, the whole mask against every token fed alone.
                    if (brute_checked < 3 && r.size() > 0) {
                        trie.allowed(r, mask);
                        int mismatches = 0;
                        for (int32_t id = 0; id < tok->vocab_size(); ++id) {
                            Recognizer probe = r;
                            const bool want = !bytes[size_t(id)].empty() && probe.feed(bytes[size_t(id)]);
                            mismatches += want != bool(mask[size_t(id) / 32] >> (id % 32) & 1u);
                        }
                        CHECK(mismatches == 0);
                        ++brute_checked;
                    }
                }
            }
        }
        std::sort(mask_us.begin(), mask_us.end());
        MESSAGE(name << ": " << trie.num_nodes() << " trie nodes, " << tokens_checked << " tokens through masks; mask "
                     << mask_us[mask_us.size() / 2] << " us p50, " << mask_us.back() << " us max");
    }
}

TEST_CASE("builtin grammars: any JSON object, and a choice among strings") {
    const Grammar json = json_object_grammar();
    for (const char* ok : {"{}", R"({"a": 1, "b": [true, false, null, -0.5e+3, "x\n\u00e9"], "c": {"d": {}}})",
                           "{ \"a\" :\n\t1 }", R"({"é☃": "😀"})"})
        CHECK_MESSAGE(matches(json, ok), ok);
    for (const char* no : {"", "[]", "1", R"({"a": 01})", R"({"a": 1,})", R"({'a': 1})", R"({"a": tru})",
                           "{\"a\": \"\x01\"}", R"({"a": 1} )", R"({"a" 1})"})
        CHECK_MESSAGE(!matches(json, no), no);
    // Whitespace is bounded: a space, or a line break and at most 20 spaces or tabs.
    Recognizer r(json);
    CHECK(r.feed("{\n" + std::string(20, ' ')));
    CHECK_FALSE(r.feed(uint8_t(' ')));
    CHECK_FALSE(matches(json, "{  }"));
    CHECK_FALSE(matches(json, "{\n\n}"));

    const Grammar choice = choice_grammar({"yes", "no", "not sure", "say \"why\"\\", "é"});
    for (const char* ok : {"yes", "no", "not sure", "say \"why\"\\", "é"}) CHECK_MESSAGE(matches(choice, ok), ok);
    for (const char* no : {"", "ye", "yess", "not", "noo", "e"}) CHECK_MESSAGE(!matches(choice, no), no);
    CHECK_THROWS_AS(choice_grammar({}), GrammarError);
}

TEST_CASE("regex: the ECMAScript subset of JSON Schema's pattern, matched whole") {
    const Case cases[] = {
        {R"(^\d{3}-\d{4}$)", {"555-1234"}, {"5551234", "555-123", "a55-1234", "555-12345"}},
        {R"([A-Z][a-z]+(?: [A-Z][a-z]+)*)", {"Ada", "Ada Lovelace"}, {"ada", "Ada lovelace", "Ada  Lovelace"}},
        {R"(colou?r|gr(a|e)y)", {"color", "colour", "gray", "grey"}, {"colr", "graey", ""}},
        {R"(\w+@\w+\.(com|org))", {"a_1@x.com", "me@site.org"}, {"@x.com", "a@x.net", "a@x_com"}},
        {R"([^\s,]+(,[^\s,]+)*)", {"a,b,c", "é,☃"}, {"a, b", ",a", "a,"}},
        {R"(\u00e9\x41\u{1F600}\.\*)", {"éA😀.*"}, {"éA😀a*"}},
        {R"(a.c)", {"abc", "a☃c"}, {"a\nc", "ac"}},
        {R"((ab){2,3}?x)", {"ababx", "abababx"}, {"abx", "ababababx"}},
        {R"(|a)", {"", "a"}, {"aa"}},
        {R"([-a-c\]]+)", {"-", "a]b", "c-"}, {"d", "["}},
    };
    for (const auto& c : cases) check_cases(c, regex_grammar);
    struct Bad {
        const char* pattern;
        int column;
        const char* says;
    };
    const Bad bad[] = {{R"(a(b)\1)", 5, "backreferences"}, {R"(a(?=b))", 3, "lookaround"}, {R"((ab)", 4, "expected ')'"},
                       {R"(ab))", 3, "unmatched ')'"},   {R"(*a)", 1, "nothing to repeat"}, {R"([b-a])", 5, "ends before"},
                       {R"(a**)", 3, "after a quantifier"}, {R"(a^b)", 2, "only at the start"}, {R"(\q)", 1, "unknown escape"}};
    for (const auto& b : bad) {
        CAPTURE(std::string(b.pattern));
        try {
            regex_grammar(b.pattern);
            FAIL("compiled");
        } catch (const GrammarError& e) {
            CHECK(e.column() == b.column);
            CHECK(std::string(e.what()).find(b.says) != std::string::npos);
        }
    }
}

namespace {

Grammar schema_of(std::string_view text) { return json_schema_grammar(boost::json::parse(text)); }

}  // namespace

TEST_CASE("json schema: the keywords taken are enforced exactly") {
    const Case cases[] = {
        {R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 3}, "age": {"type": "integer"},
             "tags": {"type": "array", "items": {"enum": ["a", "b", 1]}, "minItems": 1, "maxItems": 2}},
             "required": ["name"], "additionalProperties": false})",
         {R"({"name": "Bob"})", R"({"name": "é☃x", "age": -3})", R"({"name": "", "tags": ["a", 1]})",
          R"({ "name" : "a" , "age" : 0 , "tags" : [ "b" ] })", "{\n  \"name\": \"a\",\n  \"age\": 1\n}", R"({"name": "\"\\"})"},
         {R"({})", R"({"age": 3})", R"({"name": "Bobby"})", R"({"name": "a", "age": 1.5})", R"({"name": "a", "tags": []})",
          R"({"name": "a", "tags": ["a", "b", 1]})", R"({"name": "a", "tags": ["c"]})", R"({"age": 1, "name": "a"})",
          R"({"name": "a", "x": 1})", R"({"name": "a",})"}},
        {R"({"type": ["string", "null"]})", {R"("x")", "null"}, {"1", R"("x" )x)"}},
        {R"({"const": {"a": [1, true]}})", {R"({"a":[1,true]})"}, {R"({"a":[1,false]})"}},
        {R"({"anyOf": [{"type": "integer"}, {"type": "boolean"}]})", {"12", "false"}, {"1.0", "\"1\""}},
        {R"({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": false})",
         {"[1, \"a\"]", "[1]", "[]"}, {"[1, \"a\", 2]", "[\"a\"]"}},
        {R"({"type": "array", "prefixItems": [{"const": 0}], "minItems": 3, "maxItems": 4})",
         {"[0, 1, 2]", "[0, {}, [], null]"}, {"[0, 1]", "[1, 1, 1]", "[0, 1, 2, 3, 4]"}},
        {R"({"type": "object", "additionalProperties": {"type": "number"}})", {R"({})", R"({"a": 1, "b": 2e3})"}, {R"({"a": "x"})"}},
        {R"({"$defs": {"node": {"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
             "required": ["next"], "additionalProperties": false}}, "$ref": "#/$defs/node"})",
         {R"({"next": null})", R"({"next": {"next": {"next": null}}})"}, {R"({"next": {}})", R"({})"}},
        {R"(true)", {"1", "[{}]"}, {"x"}},
        // Open objects: the named properties in order, then others, whose keys name none of them
        // (written plainly: an escaped key could spell a name) and whose values follow additionalProperties.
        {R"({"properties": {"ab": {"type": "integer"}, "é": {"type": "boolean"}}, "additionalProperties": {"type": "string"}})",
         {R"({})", R"({"ab": 1, "x": "y"})", R"({"a": "", "abc": "", "": "", "é2": "x"})", R"({"é": true, "b": "c", "e": "d"})"},
         {R"({"ab": "x"})", R"({"x": "y", "ab": 1})", R"({"é": "x"})", R"({"x": 1})", R"({"ab": "x"})",
          R"({"ab": 1, "ab": "x"})"}},
        // pattern: unanchored unless ^...$; the string written plainly (no escapes).
        {R"({"type": "string", "pattern": "^[a-c]+\\d$"})", {R"("ab1")", R"("c0")"}, {R"("ab")", R"("xab1")", R"("ab1 ")", R"("a\u00621")"}},
        {R"({"pattern": "x{2}"})", {R"("xx")", R"("axxb")", R"("é xx ")"}, {R"("x")", R"("x\"x")", R"("x\u0078")"}},
        {R"({"type": "string", "pattern": "^a.c$"})", {R"("abc")", R"("aéc")"}, {R"("a\"c")", R"("a\\c")"}},
        // oneOf: branches that cannot both match (types, values, a discriminator); allOf merged or reduced.
        {R"({"oneOf": [{"type": "integer"}, {"type": "string", "maxLength": 2}, {"const": null}]})", {"3", R"("ab")", "null"},
         {R"("abc")", "true"}},
        {R"({"oneOf": [{"type": "object", "properties": {"kind": {"const": "cat"}, "lives": {"type": "integer"}}, "required": ["kind", "lives"], "additionalProperties": false},
                       {"type": "object", "properties": {"kind": {"enum": ["dog", "wolf"]}, "bark": {"type": "boolean"}}, "required": ["kind"], "additionalProperties": false}]})",
         {R"({"kind": "cat", "lives": 9})", R"({"kind": "wolf"})", R"({"kind": "dog", "bark": true})"},
         {R"({"kind": "cat"})", R"({"kind": "dog", "lives": 9})", R"({"kind": "cow"})"}},
        {R"({"allOf": [{"description": "x"}, {"$ref": "#/$defs/a"}], "$defs": {"a": {"type": "integer", "maximum": 5}}})", {"5", "-3"}, {"6", "\"5\""}},
        {R"({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                       {"properties": {"b": {"type": "string"}}, "required": ["b"]}]})",
         {R"({"a": 1, "b": "x"})", R"({"a": 1, "b": "x", "c": null})"}, {R"({"a": 1})", R"({"a": 1, "b": 2})", R"({"b": "x"})"}},
        {R"({"type": "integer", "minimum": 17, "maximum": 213})", {"17", "19", "20", "99", "100", "199", "200", "209", "213"},
         {"16", "214", "300", "1000", "017", "-17", "0", "1.5"}},
        {R"({"type": "integer", "exclusiveMinimum": -12, "exclusiveMaximum": 3.5})", {"-11", "-1", "0", "3"}, {"-12", "4", "-0x", "-012"}},
        {R"({"type": ["integer", "null"], "minimum": 100})", {"100", "999", "12345678901234567890", "null"}, {"99", "-1", "0"}},
        {R"({"maximum": -1000})", {"-1000", "-99999"}, {"-999", "0", "5"}},
        {R"({"format": "date"})", {R"("2024-02-29")", R"("2000-02-29")", R"("1999-12-31")"},
         {R"("2023-02-29")", R"("1900-02-29")", R"("2024-04-31")", R"("2024-13-01")", R"("24-01-01")"}},
        {R"({"format": "date-time"})", {R"("2024-01-02T03:04:05Z")", R"("2024-01-02T23:59:59.123+05:30")"},
         {R"("2024-01-02 03:04:05Z")", R"("2024-01-02T24:00:00Z")", R"("2024-01-02T03:04:05")"}},
        {R"({"format": "ipv4"})", {R"("192.168.0.1")", R"("0.0.0.0")", R"("255.255.255.255")"}, {R"("256.1.1.1")", R"("01.1.1.1")", R"("1.1.1")"}},
        {R"({"format": "uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"}, {R"("123e4567e89b12d3a456426614174000")"}},
        {R"({"format": "email"})", {R"("a.b+c@example.co")", R"("x@y")"}, {R"("a..b@example.com")", R"(".a@b")", R"("a@b.")", R"("ab")"}},
        {R"({"format": "uri"})", {R"("https://example.com/a?b=c#d")", R"("urn:isbn:0451450523")"}, {R"("//example.com")", R"("http://a b")", R"("a:b#c#d")"}},
        {R"({"type": "object", "properties": {"a": {"const": 1}}, "required": ["a"]})",
         {R"({"a": 1})", R"({"a": 1, "b": [{}], "c": null})"}, {R"({"b": 1})", R"({"a": 2})", R"({"a": 1, "a": 2})"}},
    };
    for (const auto& c : cases) check_cases(c, schema_of);
}

TEST_CASE("json schema: what it cannot enforce is refused, naming the keyword and where") {
    const std::pair<const char*, const char*> cases[] = {
        {R"({"type": "string", "pattern": "^a|b"})", "at '#/pattern': anchors"},
        {R"x({"type": "string", "pattern": "a(?=b)"})x", "lookaround"},
        {R"({"type": "string", "pattern": "a", "maxLength": 3})", "beside 'minLength' or 'maxLength'"},
        {R"({"type": "string", "format": "hostname"})", "at '#/format': format 'hostname' is not supported yet"},
        {R"({"type": "object", "properties": {"a": {"type": "number", "minimum": 1e20}}, "additionalProperties": false})",
         "at '#/properties/a/minimum': a bound of 9e15 or more"},
        {R"({"type": "integer", "minimum": 5, "exclusiveMaximum": 5})", "no integer lies between"},
        {R"({"oneOf": [{"type": "integer"}, {"type": "number"}]})", "at '#/oneOf': 'oneOf' whose branches may overlap"},
        {R"({"oneOf": [{"enum": [1, "a"]}, {"enum": ["a", 2]}]})", "may overlap"},
        {R"({"allOf": [{"properties": {"a": {}}}, {"properties": {"a": {"type": "integer"}}}]})", "naming property 'a' twice"},
        {R"({"allOf": [{"type": "string", "pattern": "a"}, {"pattern": "b"}]})", "at '#': 'pattern' in two of the schemas"},
        {R"({"allOf": [{"type": "object", "additionalProperties": false}, {"properties": {"b": {}}}]})", "beside another schema's 'properties'"},
        {R"({"type": "object", "patternProperties": {"^a": {}}})", "'patternProperties' is not supported yet"},
        {R"({"type": "array", "items": false, "minItems": 1})", "'minItems' needs more items"},
        {R"({"$ref": "#/$defs/none"})", "points at nothing"},
        {R"(false)", "matches nothing"},
        {R"({"type": "tuple"})", "unknown type 'tuple'"},
    };
    for (const auto& [schema, says] : cases) {
        CAPTURE(std::string(schema));
        CHECK_THROWS_WITH_AS(schema_of(schema), doctest::Contains(says), GrammarError);
    }
}

TEST_CASE("json schema: the JSON-Schema-Test-Suite (draft 2020-12): what compiles accepts no invalid instance") {
    // Instances are written compactly, keys in their own order; the grammar
    // wants the keys of `properties` in the schema's order, so a valid
    // instance that orders them otherwise is refused (counted, not an error).
    // An invalid instance accepted would be a grammar looser than its schema.
    namespace fs = std::filesystem;
    const fs::path dir = fs::path(MINFER_SHARED_DIR) / "json-schema-test-suite/tests/draft2020-12";
    int schemas = 0, compiled = 0, valid = 0, valid_accepted = 0, invalid = 0;
    std::map<std::string, int> refused_by;  // the first keyword each refusal names
    for (const auto& entry : fs::directory_iterator(dir)) {
        if (entry.path().extension() != ".json") continue;
        const boost::json::value file = boost::json::parse(read_file(entry.path().string()));
        for (const auto& group : file.as_array()) {
            ++schemas;
            Grammar g;
            try {
                g = json_schema_grammar(group.at("schema"));
            } catch (const GrammarError& e) {
                const std::string what = e.what();
                const size_t q = what.find("': '");
                refused_by[q == std::string::npos ? what.substr(0, 40) : what.substr(q + 4, what.find('\'', q + 4) - q - 4)]++;
                continue;
            }
            ++compiled;
            for (const auto& test : group.at("tests").as_array()) {
                const std::string text = boost::json::serialize(test.at("data"));
                const bool ok = matches(g, text);
                if (test.at("valid").as_bool()) {
                    ++valid;
                    valid_accepted += ok;
                } else {
                    ++invalid;
                    CAPTURE(entry.path().filename().string());
                    CAPTURE(boost::json::serialize(group.at("schema")));
                    CAPTURE(text);
                    CHECK_FALSE(ok);
                }
            }
        }
    }
    std::string refusals;
    for (const auto& [k, n] : refused_by) refusals += k + " " + std::to_string(n) + ", ";
    MESSAGE(compiled << " of " << schemas << " schemas compile; " << valid_accepted << " of " << valid
                     << " valid instances accepted, 0 of " << invalid << " invalid ones; refused by: " << refusals);
}

TEST_CASE("constraint: a dead end allows no token, and a refused token changes nothing") {
    auto vocab = std::make_shared<const TokenVocabulary>(std::vector<std::string>{"a", "b", "ab", ""});
    Constraint c(std::make_shared<const Grammar>(parse_gbnf(R"(root ::= "a" "c" | "b")")), vocab);
    const int32_t end_ids[] = {3};
    std::vector<uint32_t> mask;
    c.mask(mask, end_ids);
    CHECK(mask[0] == 0b0011u);  // "a", "b"; not "ab", not the end
    CHECK_FALSE(c.accept(2));
    CHECK(c.accept(0));
    c.mask(mask, end_ids);
    CHECK(mask[0] == 0u);  // "c" has no token: a dead end, and the text is not whole
    CHECK_FALSE(c.accepting());
    c.rollback(1);
    CHECK(c.accept(1));
    CHECK(c.accepting());
    CHECK(c.can_only_end());
    c.mask(mask, end_ids);
    CHECK(mask[0] == 0b1000u);  // only the end
}

TEST_CASE("constraint: a lazy grammar is free until its trigger, holds from there, and rolls back across it") {
    auto vocab = std::make_shared<const TokenVocabulary>(std::vector<std::string>{"hi ", "<c", "all>", "x", "1", ""});
    const auto g = std::make_shared<const Grammar>(parse_gbnf(R"(root ::= "<call>" [0-9]+)"));
    const int32_t end_ids[] = {5};
    Constraint c(g, vocab, {{"<call>", false}});
    std::vector<uint32_t> mask{1u};
    c.mask(mask, end_ids);
    CHECK(mask.empty());  // free text: no mask at all
    CHECK(c.accepting());
    CHECK(c.accept(0));
    CHECK(c.accept(3));
    CHECK(c.accept(5));  // a control token (no bytes) is free text too
    CHECK(c.accept(1));  // "<c": not yet the trigger
    CHECK_FALSE(c.active());
    CHECK(c.accept(2));  // "all>": the trigger is whole; "<call>" is fed to the grammar
    CHECK(c.active());
    c.mask(mask, end_ids);
    REQUIRE(mask.size() == 1);
    CHECK(mask[0] == 0b010000u);  // only a digit; not the end
    CHECK_FALSE(c.accepting());
    CHECK_FALSE(c.accept(3));
    CHECK(c.accept(4));
    CHECK(c.accepting());
    c.rollback(2);  // back before the trigger's last token: free again
    CHECK_FALSE(c.active());
    c.mask(mask, end_ids);
    CHECK(mask.empty());
    CHECK(c.accept(2));
    CHECK(c.active());

    // A trigger at the start only counts there.
    Constraint at_start(std::make_shared<const Grammar>(parse_gbnf(R"(root ::= "x" [0-9])")), vocab, {{"x", true}});
    CHECK(at_start.accept(0));
    CHECK(at_start.accept(3));
    CHECK_FALSE(at_start.active());
    Constraint first(std::make_shared<const Grammar>(parse_gbnf(R"(root ::= "x" [0-9])")), vocab, {{"x", true}});
    CHECK(first.accept(3));
    CHECK(first.active());
    CHECK_FALSE(first.accept(0));  // the grammar holds now
    CHECK(first.accept(4));
    CHECK(first.can_only_end());
}

TEST_CASE("mask cache: the constraints of one grammar share its positions' splits while one lives") {
    auto vocab = std::make_shared<const TokenVocabulary>(std::vector<std::string>{"a", "b", "ab", ""});
    auto g = std::make_shared<const Grammar>(parse_gbnf(R"(root ::= "a"+ "b")"));
    auto other = std::make_shared<const Grammar>(parse_gbnf(R"(root ::= "a"+ "b")"));
    std::shared_ptr<GrammarMasks> first = vocab->masks_for(g);
    CHECK(vocab->masks_for(g) == first);
    CHECK(vocab->masks_for(other) != first);  // the same text, another grammar: its own
    Constraint c(g, vocab), d(g, vocab);
    std::vector<uint32_t> mc, md;
    c.mask(mc, {});
    CHECK(c.accept(0));
    d.mask(md, {});
    CHECK(mc == md);
    CHECK(mc[0] == 0b101u);  // "a" and "ab"; "b" needs an "a" before it
}

TEST_CASE("mask cache: the masks from the positions' splits are the plain walk's, step by step, on a real vocabulary") {
    const std::string dir = std::string(MINFER_SHARED_DIR) + "/grammars/";
    const auto cases = boost::json::parse(read_file(dir + "cases.json")).as_object();
    const auto file = minfer::GGUFFile::open(std::string(MINFER_SHARED_DIR) + "/vocab/ggml-vocab-gpt-2.gguf");
    const auto tok = minfer::Tokenizer::from_gguf(file);
    std::vector<std::string> bytes(size_t(tok->vocab_size()));
    for (int32_t i = 0; i < tok->vocab_size(); ++i)
        if (tok->token_type(i) != minfer::TokenType::Control) bytes[size_t(i)] = tok->token_to_piece(i);
    const TokenTrie trie(bytes);
    MaskCache cache;
    std::vector<std::pair<std::shared_ptr<const Grammar>, std::vector<std::string>>> grammars;
    for (const auto& [file_name, c] : cases) {
        std::vector<std::string> texts;
        for (const char* kind : {"accept", "reject"})
            for (const auto& t : c.at(kind).as_array()) texts.emplace_back(t.as_string());
        grammars.emplace_back(std::make_shared<const Grammar>(parse_gbnf(read_file(dir + std::string(file_name)))), texts);
    }
    grammars.emplace_back(std::make_shared<const Grammar>(json_schema_grammar(boost::json::parse(
                              R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                  "tags": {"type": "array", "items": {"enum": ["a", "b\"c"]}}}, "additionalProperties": {"type": "number"}})"))),
                          std::vector<std::string>{R"({"name": "Ann \"A\" é", "tags": ["b\"c"], "x": -1.5e2})", R"({"name": "toolongforthis"})"});
    // The root used inside itself (its predictions have a parent too), and exact number bounds (hundreds of rules).
    grammars.emplace_back(std::make_shared<const Grammar>(parse_gbnf(R"(root ::= "[" (root ("," root)*)? "]" | [0-9]+)")),
                          std::vector<std::string>{"[[12,3],[],[[4]]]", "[1,[2,]"});
    grammars.emplace_back(std::make_shared<const Grammar>(json_schema_grammar(boost::json::parse(
                              R"({"type": "number", "maximum": 3, "exclusiveMinimum": -2.5})"))),
                          std::vector<std::string>{"2.999e0", "-2.4", "3.0001", "-25e-1"});
    int steps = 0, mismatched_steps = 0;
    double cached_us = 0, plain_us = 0, warm_us = 0;
    for (int pass = 0; pass < 2; ++pass)  // the second with every split computed
    for (const auto& [g, texts] : grammars) {
        GrammarMasks masks(g, trie, cache);
        for (const std::string& text : texts) {
            Recognizer r(*g);
            std::vector<uint32_t> want, got;
            for (const int32_t id : tok->encode(text, false)) {
                auto t0 = std::chrono::steady_clock::now();
                trie.allowed(r, want);
                auto t1 = std::chrono::steady_clock::now();
                masks.allowed(r, got);
                auto t2 = std::chrono::steady_clock::now();
                plain_us += std::chrono::duration<double, std::micro>(t1 - t0).count();
                (pass ? warm_us : cached_us) += std::chrono::duration<double, std::micro>(t2 - t1).count();
                ++steps;
                mismatched_steps += want != got;
                if (!(want[size_t(id) / 32] >> (id % 32) & 1u) || !r.feed(bytes[size_t(id)])) break;
            }
        }
    }
    CHECK(mismatched_steps == 0);
    CHECK(steps > 300);
    MESSAGE(steps << " steps; " << cache.size() << " splits cached; mean mask " << 2 * cached_us / steps
                  << " us while computing splits, " << 2 * warm_us / steps << " us with them computed, " << plain_us / steps
                  << " us the plain walk");
}

TEST_CASE("integer ranges: every integer of a range and no other, on random ranges") {
    std::mt19937_64 rng(17);
    for (int trial = 0; trial < 300; ++trial) {
        const int64_t scale = trial % 3 == 0 ? 30 : trial % 3 == 1 ? 3000 : 300000;
        int64_t a = int64_t(rng() % uint64_t(2 * scale)) - scale, b = int64_t(rng() % uint64_t(2 * scale)) - scale;
        if (a > b) std::swap(a, b);
        const bool open_lo = trial % 7 == 0, open_hi = trial % 11 == 0;
        CAPTURE(a);
        CAPTURE(b);
        const Grammar g = parse_gbnf("root ::= " + integer_range_gbnf(open_lo ? std::nullopt : std::optional<int64_t>(a),
                                                                       open_hi ? std::nullopt : std::optional<int64_t>(b)));
        for (int k = 0; k < 40; ++k) {
            const int64_t x = int64_t(rng() % uint64_t(4 * scale)) - 2 * scale;
            const bool in = (open_lo || x >= a) && (open_hi || x <= b);
            CAPTURE(x);
            CHECK(matches(g, std::to_string(x)) == in);
        }
        for (const int64_t x : {a, b})
            CHECK(matches(g, std::to_string(x)));
        CHECK_FALSE(matches(g, "-0"));
        CHECK_FALSE(matches(g, "00"));
    }
}
