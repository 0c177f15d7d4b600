// libFuzzer target for the GBNF compiler and the Earley recognizer
// (engine/grammar/; see README.md in this folder).
//
// Any input is a grammar. Compiling it must either succeed or throw a
// GrammarError (bounded: repetitions that expand too far are an error). A
// grammar that compiles is then run over the input's own bytes, and a small
// vocabulary's token mask is taken at every step: no crash, no hang
// (libFuzzer's -timeout), no leak.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/grammar/earley.h"
#include "engine/grammar/gbnf.h"
#include "engine/grammar/token_mask.h"

using namespace minfer::grammar;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    Grammar g;
    try {
        g = parse_gbnf(text);
    } catch (const GrammarError&) {
        return 0;
    }
    static const TokenTrie trie(std::vector<std::string>{"a", "ab", "\"", "{", "}", " ", "1", "\xC3", "\xA9", "", "x y"});
    Recognizer r(g);
    std::vector<uint32_t> mask;
    for (size_t i = 0; i < size && i < 64; ++i) {
        trie.allowed(r, mask);
        if (!r.feed(data[i])) break;
    }
    (void)r.accepting();
    r.rollback(r.size() / 2);
    (void)r.accepting();
    return 0;
}
