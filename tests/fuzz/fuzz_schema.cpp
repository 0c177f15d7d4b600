// libFuzzer target for the JSON Schema compiler (engine/grammar/json_schema.cpp)
// and the tool-call parser (server/tool_call_parser.cpp); see README.md here.
//
// An input that is JSON is a schema: compiling it must succeed or throw a
// GrammarError (bounded: no hang, no runaway memory), and a grammar that
// compiles is run over the input's own bytes. Every input is also a model's
// output: each format's parser reads it whole and streamed (cut at a few
// places), and must not crash.
#include <boost/json/src.hpp>  // Boost.JSON, header-only in this program

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/grammar/earley.h"
#include "engine/grammar/json_schema.h"
#include "server/tool_call_parser.h"

using namespace minfer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    boost::system::error_code ec;
    const boost::json::value schema = boost::json::parse(text, ec);
    if (!ec) {
        try {
            const grammar::Grammar g = grammar::json_schema_grammar(schema);
            grammar::Recognizer r(g);
            for (size_t i = 0; i < size && i < 256 && r.feed(data[i]); ++i) {
            }
            (void)r.accepting();
        } catch (const grammar::GrammarError&) {
        }
    }
    for (ToolCallFormat f : {ToolCallFormat::Hermes, ToolCallFormat::Llama3Json, ToolCallFormat::Mistral, ToolCallFormat::Json}) {
        (void)parse_tool_calls(f, text, true);
        ToolCallStream stream(f);
        for (size_t cut : {size / 3, size / 2, size})
            (void)stream.update(text.substr(0, cut), cut == size);
    }
    return 0;
}
