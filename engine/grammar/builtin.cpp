#include "engine/grammar/builtin.h"

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
    std::string src = "root ::=";
    for (size_t i = 0; i < choices.size(); ++i) src += (i ? " | " : " ") + gbnf_literal(choices[i]);
    return parse_gbnf(src);
}

}  // namespace minfer::grammar
