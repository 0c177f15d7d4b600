// The fast path of the mask cache's splits (engine/grammar/residuals.h): the
// whole-vocabulary walk with residual states must split the vocabulary
// exactly as the walk with an Earley step per trie node does, at every
// position of grammars that exercise it (strings with escapes and non-ASCII
// characters, bounded lengths, numbers, patterns whose residuals branch,
// property names kept apart from the named ones) and those it hands back to
// the recognizer (left recursion), on byte-level and SentencePiece
// vocabularies (tokens that end inside a UTF-8 character, byte tokens).
#include <doctest/doctest.h>

#include <algorithm>
#include <boost/json.hpp>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/grammar/earley.h"
#include "engine/grammar/gbnf.h"
#include "engine/grammar/json_schema.h"
#include "engine/grammar/residuals.h"
#include "engine/grammar/token_mask.h"
#include "engine/text/tokenizer.h"

using namespace minfer::grammar;

namespace {

std::vector<std::string> vocabulary(const std::string& name) {
    const auto file = minfer::GGUFFile::open(std::string(MINFER_SHARED_DIR) + "/vocab/" + name);
    const auto tok = minfer::Tokenizer::from_gguf(file);
    std::vector<std::string> bytes(size_t(tok->vocab_size()));
    for (int32_t i = 0; i < tok->vocab_size(); ++i)
        if (tok->token_type(i) != minfer::TokenType::Control) bytes[size_t(i)] = tok->token_to_piece(i);
    return bytes;
}

std::vector<Grammar> grammars() {
    std::vector<Grammar> out;
    for (const char* schema : {
             R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                 "tags": {"type": "array", "items": {"enum": ["a", "b\"c", "é☃"]}}},
                 "additionalProperties": {"type": "number"}})",
             R"({"type": "string", "minLength": 2, "maxLength": 5})",
             R"({"type": "object", "properties": {"n": {"type": "string", "minLength": 3}}, "required": ["n"]})",
             R"({"type": "object", "properties": {"bf": {"type": "integer"}, "b": {"type": "string"}},
                 "required": ["bf"], "additionalProperties": false})",
             R"({"type": "object", "properties": {"foo": {"type": "boolean"}}, "additionalProperties": {"type": "string"}})",
             R"({"type": "string", "pattern": "^[a-z]*[a-z0-9]*-?\\d+$"})",
             R"({"type": "array", "items": {"type": "number"}, "maxItems": 3})",
             R"({"type": "string", "format": "date-time"})",
             R"(true)",
         })
        out.push_back(json_schema_grammar(boost::json::parse(schema)));
    for (const char* gbnf : {
             // Left recursion: its residuals never reach a class, the recognizer walks.
             R"(root ::= "\"" expr "\"" | expr
                expr ::= expr "+" term | term
                term ::= [0-9]+ | "é" | [^"+0-9]{1,3})",
             // Two loops that take the same characters: sets of residuals.
             R"(root ::= [a-zé]* [a-z0-9☃]* "!" | "a" [^!]*)",
             // Loops that begin after a first character (most of the
             // vocabulary under the root's children that lead there): one
             // without characters past ASCII, one with all of them.
             R"(root ::= [ a-zA-Z] [a-z ]* ".")",
             R"(root ::= [^b] [^"]* "\"")",
             // The same past a first character that is not ASCII: the
             // characters of a lead byte (é's) all lead into the loop, but
             // the loop refuses é (its tokens are walked from the state
             // before it); another lead byte's characters (’'s) part.
             R"(root ::= [^b’] [^"é]* "\"")",
         })
        out.push_back(parse_gbnf(gbnf));
    return out;
}

}  // namespace

TEST_CASE("grammar residuals: the split walked with residual states is the recognizer's, at every position") {
    int positions = 0, mismatched = 0;
    for (const char* vocab : {"ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-spm.gguf"}) {
        const TokenTrie trie(vocabulary(vocab));
        for (const Grammar& g : grammars()) {
            for (int32_t r = 0; r < int32_t(g.rules.size()); ++r)
                for (int32_t a = 0; a < int32_t(g.rules[size_t(r)].alternatives.size()); ++a)
                    for (int32_t d = 0; d < int32_t(g.rules[size_t(r)].alternatives[size_t(a)].size()); ++d) {
                        // The rest as mask_cache.cpp builds it.
                        Grammar rest = g;
                        const Sequence& seq = g.rules[size_t(r)].alternatives[size_t(a)];
                        rest.rules.push_back({"rest", {Sequence(seq.begin() + d, seq.end())}});
                        rest.root = int32_t(rest.rules.size() - 1);
                        Recognizer plain(rest), fast(rest);
                        Residuals dfa(rest, rest.rules.back().alternatives[0]);
                        std::vector<uint32_t> want_sure, want_uncertain, sure, uncertain;
                        trie.classify(plain, want_sure, want_uncertain);
                        trie.classify(fast, dfa, sure, uncertain);
                        ++positions;
                        CAPTURE(vocab);
                        CAPTURE(g.rules[size_t(r)].name);
                        CAPTURE(a);
                        CAPTURE(d);
                        CHECK(fast.size() == 0);  // left as it was
                        CHECK(sure == want_sure);
                        CHECK(uncertain == want_uncertain);
                        mismatched += sure != want_sure || uncertain != want_uncertain;
                    }
        }
    }
    CHECK(mismatched == 0);
    CHECK(positions > 200);
    MESSAGE(positions << " positions compared");
}

TEST_CASE("grammar residuals: a string's state comes back after each plain character; left recursion is unknown") {
    const Grammar g = parse_gbnf(R"(root ::= "\"" [^"\\]* "\"" [0-9]
                                    expr ::= expr "+" "1" | "1")");
    Residuals dfa(g, g.rules[size_t(g.root)].alternatives[0]);
    const int32_t in = dfa.next(0, '"');
    REQUIRE(in >= 0);
    CHECK(dfa.next(in, 'a') == in);
    CHECK(dfa.next(in, 0x2603) == in);  // ☃
    CHECK_FALSE(dfa.accepting(in));
    const int32_t out = dfa.next(in, '"');
    REQUIRE(out >= 0);
    CHECK(dfa.next(out, 'a') == Residuals::kRefused);
    CHECK(dfa.accepting(dfa.next(out, '7')));
    CHECK(dfa.expects(in, 0x2600, 0x263F));
    CHECK_FALSE(dfa.expects(out, 0x2600, 0x263F));

    const int32_t expr = int32_t(std::find_if(g.rules.begin(), g.rules.end(), [](const Rule& r) { return r.name == "expr"; }) -
                                 g.rules.begin());
    Residuals left(g, {Symbol{Symbol::Kind::Rule, expr}});
    CHECK_FALSE(left.known(0));
    CHECK(left.next(0, '1') == Residuals::kUnknown);
}

TEST_CASE("grammar residuals: a string short of its minimum length drains into its loop; a maximum does not") {
    const Grammar g = parse_gbnf(R"(root ::= "\"" [^"] [^"] [^"]* "\"" | "<" [^>]? [^>]? ">")");
    Residuals dfa(g, g.rules[size_t(g.root)].alternatives[0]);
    const int32_t in = dfa.next(0, '"');
    REQUIRE(in >= 0);
    CHECK(dfa.loop(in).ranges.empty());  // two characters still to come
    const int32_t looping = dfa.next(dfa.next(in, 'q'), 0x2603);
    REQUIRE(looping >= 0);
    REQUIRE_FALSE(dfa.loop(looping).ranges.empty());
    CHECK(dfa.drain(in).ranges == dfa.loop(looping).ranges);
    CHECK(dfa.drain(dfa.next(in, 'q')).ranges == dfa.loop(looping).ranges);
    CHECK(dfa.drain(0).ranges.empty());  // '"' or '<' first
    Residuals bounded(g, g.rules[size_t(g.root)].alternatives[1]);
    CHECK(bounded.drain(bounded.next(0, '<')).ranges.empty());  // at most two characters
}
