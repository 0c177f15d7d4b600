// GrammarCache: one compile per source, least recently used out, failures not kept.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "engine/grammar/gbnf.h"
#include "engine/grammar/grammar_cache.h"

using namespace minfer::grammar;

TEST_CASE("grammar cache: a source compiles once, the oldest goes, an error is not kept") {
    GrammarCache cache(2);
    int compiles = 0;
    auto gbnf = [&](const std::string& source) {
        return cache.get("gbnf:" + source, [&] {
            ++compiles;
            return parse_gbnf(source);
        });
    };
    const auto a = gbnf("root ::= \"a\"");
    CHECK(gbnf("root ::= \"a\"") == a);  // the same object, not a copy
    CHECK(compiles == 1);
    CHECK(cache.hits() == 1);
    const auto b = gbnf("root ::= \"b\"");
    CHECK(b != a);
    gbnf("root ::= \"a\"");  // a is the most recent now: c pushes b out
    gbnf("root ::= \"c\"");
    CHECK(cache.size() == 2);
    CHECK(compiles == 3);
    gbnf("root ::= \"a\"");
    CHECK(compiles == 3);
    CHECK(gbnf("root ::= \"b\"") != b);  // compiled again
    CHECK(compiles == 4);
    // A source that fails compiles (and throws) every time.
    CHECK_THROWS_AS(gbnf("root ::= ("), GrammarError);
    CHECK_THROWS_AS(gbnf("root ::= ("), GrammarError);
    CHECK(compiles == 6);
    CHECK(cache.size() == 2);
}
