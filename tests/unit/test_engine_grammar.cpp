// Grammar-constrained generation through the engine: every constrained
// sample's text is a sentence of its grammar (or a prefix of one, cut by
// max_tokens), n > 1 forks keep the constraint, and the unconstrained
// requests of the same batch come out bit for bit as they do without it.
#include "engine_test_fixture.h"

#include "engine/grammar/builtin.h"
#include "engine/grammar/earley.h"
#include "engine/grammar/gbnf.h"

using namespace engine_test;

namespace {

bool is_sentence(const grammar::Grammar& g, const std::string& text, bool whole) {
    grammar::Recognizer r(g);
    return r.feed(text) && (!whole || r.accepting());
}

}  // namespace

TEST_CASE("engine: grammar-constrained samples follow their grammar; the rest of the batch is unchanged") {
    // stories260K's pieces begin with a space: words, then a full stop, or a number list.
    auto words = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(R"(root ::= (" " [a-z]+){3,6} ".")"));
    auto numbers = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(R"(root ::= " " [0-9]{1,3} (", " [0-9]{1,3})*)"));
    auto json = std::make_shared<const grammar::Grammar>(grammar::json_object_grammar());
    std::mt19937 rng(3);
    std::vector<Job> plain, mixed;
    for (int i = 0; i < 6; ++i) {
        Job j;
        j.prompt = random_prompt(rng, 5 + 3 * i);
        j.options.max_tokens = 24;
        j.options.sampling.temperature = i % 2 ? 0.9f : 0.0f;
        j.options.has_seed = true;
        j.options.sampling.seed = 100 + i;
        plain.push_back(j);
    }
    mixed = plain;
    for (int i = 0; i < 6; ++i) {
        Job j;
        j.prompt = random_prompt(rng, 7);
        j.options.max_tokens = i >= 4 ? 120 : 40;
        j.options.sampling.temperature = i == 0 ? 0.0f : 1.0f;
        j.options.has_seed = true;
        j.options.sampling.seed = 7 + i;
        j.options.n = i == 3 ? 3 : 1;  // forks carry the grammar state
        j.options.grammar = i >= 4 ? json : i % 2 ? numbers : words;
        mixed.push_back(j);
    }
    const auto alone = run(plain, small_config());
    const auto together = run(mixed, small_config());
    for (size_t i = 0; i < plain.size(); ++i) {
        CAPTURE(i);
        CHECK(together[i].samples.at(0).tokens == alone[i].samples.at(0).tokens);
    }
    int whole = 0;
    for (size_t i = plain.size(); i < mixed.size(); ++i) {
        const grammar::Grammar& g = *mixed[i].options.grammar;
        for (const auto& [k, s] : together[i].samples) {
            CAPTURE(i);
            CAPTURE(k);
            CAPTURE(s.text);
            CAPTURE(s.finish_reason);
            if (s.finish_reason == "stop") {
                CHECK(is_sentence(g, s.text, true));
                ++whole;
            } else {
                CHECK(s.finish_reason == "length");
                CHECK(is_sentence(g, s.text, false));
            }
        }
    }
    CHECK(whole >= 2);  // the two word samples (the number lists may go on to max_tokens)
    MESSAGE(whole << " constrained samples ended whole");
}

TEST_CASE("engine: a character no token spells whole comes from byte tokens") {
    // stories260K has no piece for the snowman (E2 98 83); its byte tokens spell it.
    auto snowman = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(R"(root ::= "a" "\u2603" | "b")"));
    std::mt19937 rng(5);
    for (const float temperature : {0.0f, 1.0f}) {
        Job j;
        j.prompt = random_prompt(rng, 4);
        j.options.max_tokens = 10;
        j.options.sampling.temperature = temperature;
        j.options.has_seed = true;
        j.options.n = 4;
        j.options.grammar = snowman;
        for (const auto& [k, s] : run_alone(j, small_config()).samples) {
            CAPTURE(s.text);
            CHECK((s.text == "b" || s.text == "a\u2603"));
            CHECK(s.finish_reason == "stop");
        }
    }
}

TEST_CASE("engine: a constrained request that finds its prompt in the prefix cache generates what it did without") {
    auto words = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(R"(root ::= (" " [a-z]+){2,8} ".")"));
    std::mt19937 rng(11);
    Job j;
    j.prompt = random_prompt(rng, 70);  // several blocks of 16
    j.options.max_tokens = 40;
    j.options.grammar = words;
    j.options.has_seed = true;
    j.options.sampling.seed = 5;
    j.options.sampling.temperature = 0.8f;
    const Result first = run_alone(j, small_config());
    EngineStats st;
    // The same request twice, the second arriving after the first has finished its prompt.
    const auto twice = run({j, j}, small_config(), &st, {0, 40});
    CHECK(st.prefix_cache_hits >= 64);
    for (const Result& r : twice) {
        CHECK(r.samples.at(0).tokens == first.samples.at(0).tokens);
        CHECK(is_sentence(*words, r.samples.at(0).text, r.samples.at(0).finish_reason == "stop"));
    }
}
