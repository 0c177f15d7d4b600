#include "engine/grammar/builtin.h"

#include <cstdio>

#include "engine/grammar/gbnf.h"

namespace minfer::grammar {

Grammar json_object_grammar() {
    static const char* kJson = R"(
root   ::= object
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}"
array  ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" ( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws     ::= ( " " | "\n" [ \t]{0,20} )?
)";
    return parse_gbnf(kJson);
}

Grammar choice_grammar(const std::vector<std::string>& choices) {
    if (choices.empty()) throw GrammarError(0, 0, "a choice needs at least one string");
    // GBNF source, each string a literal with every byte that is not plain
    // printable ASCII (or is a quote or backslash) escaped.
    std::string src = "root ::=";
    for (size_t i = 0; i < choices.size(); ++i) {
        src += i ? " | \"" : " \"";
        for (const unsigned char c : choices[i]) {
            if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') {
                src += char(c);
            } else if (c < 0x80) {
                char esc[8];
                std::snprintf(esc, sizeof esc, "\\x%02X", c);
                src += esc;
            } else {
                src += char(c);  // UTF-8 as it is: the compiler reads whole characters
            }
        }
        src += '"';
    }
    return parse_gbnf(src);
}

}  // namespace minfer::grammar
