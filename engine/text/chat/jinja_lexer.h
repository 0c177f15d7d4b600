// Template source → tokens, with jinja2's whitespace rules applied here, as
// jinja2's own lexer applies them: `{%-`/`-%}` (and `{{-`, `{#-`...) strip the
// whitespace on that side; trim_blocks drops the first newline after a block
// or comment tag; lstrip_blocks drops the spaces and tabs before a block or
// comment tag that starts its line. Hugging Face turns both options on.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace minfer::jinja {

enum class TokenType {
    Data,           // literal template text
    VariableBegin,  // {{
    VariableEnd,    // }}
    BlockBegin,     // {%
    BlockEnd,       // %}
    Name,
    String,         // text holds the decoded value
    Integer,
    Float,
    Operator,       // + - * / // % ** ~ == != < <= > >= = . : | , ( ) [ ] { }
    End,
};

struct Token {
    TokenType type;
    std::string text;
    int line = 1;
    int64_t integer = 0;
    double number = 0;
};

// Throws TemplateError (with the line) for an unterminated tag, comment or
// string, or a character that is no token.
std::vector<Token> tokenize(std::string_view source);

}  // namespace minfer::jinja
