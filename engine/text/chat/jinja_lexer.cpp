#include "engine/text/chat/jinja_lexer.h"

#include <cctype>
#include <charconv>
#include <cstdlib>

#include "engine/text/chat/jinja_text.h"
#include "engine/text/chat/jinja_value.h"

namespace minfer::jinja {

namespace {

constexpr size_t npos = std::string::npos;

// jinja2 reads "\r\n" and "\r" as "\n", and drops one newline at the very end
// (keep_trailing_newline=False).
std::string normalize_newlines(std::string_view in) {
    std::string out;
    out.reserve(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
        if (in[i] == '\r') {
            out.push_back('\n');
            if (i + 1 < in.size() && in[i + 1] == '\n') ++i;
        } else {
            out.push_back(in[i]);
        }
    }
    if (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

class Lexer {
public:
    explicit Lexer(std::string source) : src_(std::move(source)) {}

    std::vector<Token> run() {
        while (pos_ < src_.size()) {
            const size_t tag = find_tag_start(pos_);
            if (tag == npos) {
                emit(TokenType::Data, src_.substr(pos_), line_);
                advance_to(src_.size());
                break;
            }
            const char kind = src_[tag + 1];  // '{', '%' or '#'
            size_t after = tag + 2;
            char sign = 0;
            if (after < src_.size() && (src_[after] == '-' || src_[after] == '+')) sign = src_[after++];
            std::string text = src_.substr(pos_, tag - pos_);
            strip_before_tag(text, sign, /*lstrip_allowed=*/kind != '{');
            if (!text.empty()) emit(TokenType::Data, std::move(text), line_);
            advance_to(after);
            if (kind == '#') {
                lex_comment();
            } else if (kind == '%') {
                if (!try_lex_raw()) {
                    emit(TokenType::BlockBegin, "{%", line_);
                    lex_tag_body(/*block=*/true);
                }
            } else {
                emit(TokenType::VariableBegin, "{{", line_);
                lex_tag_body(/*block=*/false);
            }
        }
        tokens_.push_back(Token{TokenType::End, "", line_});
        return std::move(tokens_);
    }

private:
    [[noreturn]] void fail(const std::string& msg) const { throw TemplateError(msg, line_); }

    size_t find_tag_start(size_t from) const {
        for (size_t p = src_.find('{', from); p != npos; p = src_.find('{', p + 1))
            if (p + 1 < src_.size() && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#')) return p;
        return npos;
    }

    void advance_to(size_t pos) {
        for (size_t i = pos_; i < pos; ++i)
            if (src_[i] == '\n') ++line_;
        pos_ = pos;
    }

    void emit(TokenType type, std::string text, int line) { tokens_.push_back(Token{type, std::move(text), line}); }

    // The end of a run of (Unicode) whitespace starting at pos.
    size_t skip_space(size_t pos) const {
        while (pos < src_.size()) {
            size_t next = pos;
            if (!text::is_space(text::next_code_point(src_, next))) break;
            pos = next;
        }
        return pos;
    }

    // The data before a tag: "-" strips all whitespace before it; otherwise
    // lstrip_blocks strips the indentation of a block or comment tag that is
    // alone at the start of its line ("+" turns that off).
    void strip_before_tag(std::string& text, char sign, bool lstrip_allowed) const {
        if (sign == '-') {
            text = text::strip(text, false, true);
        } else if (sign != '+' && lstrip_allowed) {
            const size_t nl = text.rfind('\n');
            const size_t line_start = nl == npos ? 0 : nl + 1;
            if ((line_start > 0 || line_starting_) && text::all_space(std::string_view(text).substr(line_start)))
                text.resize(line_start);
        }
    }

    // After the end of a tag: "-" eats all following whitespace; a plain block
    // or comment end eats one newline (trim_blocks); "+" keeps everything.
    void finish_tag(size_t end_of_delimiter, char sign, bool trim_newline) {
        size_t after = end_of_delimiter;
        if (sign == '-') after = skip_space(after);
        else if (sign == 0 && trim_newline && after < src_.size() && src_[after] == '\n') ++after;
        // jinja2 lstrips the next tag at a line start only if this match ended a line.
        line_starting_ = after > 0 && src_[after - 1] == '\n';
        advance_to(after);
    }

    void lex_comment() {
        const size_t close = src_.find("#}", pos_);
        if (close == npos) fail("missing end of comment tag '#}'");
        char sign = 0;
        if (close > pos_ && (src_[close - 1] == '-' || src_[close - 1] == '+')) sign = src_[close - 1];
        finish_tag(close + 2, sign, true);
    }

    // {% raw %} ... {% endraw %}: everything between is data.
    bool try_lex_raw() {
        size_t p = skip_space(pos_);
        if (src_.compare(p, 3, "raw") != 0) return false;
        p = skip_space(p + 3);
        size_t body;
        if (src_.compare(p, 3, "-%}") == 0) body = skip_space(p + 3);
        else if (src_.compare(p, 2, "%}") == 0) body = p + 2;
        else return false;
        line_starting_ = src_[body - 1] == '\n';
        advance_to(body);
        for (size_t open = src_.find("{%", body); open != npos; open = src_.find("{%", open + 2)) {
            size_t q = open + 2;
            char sign = 0;
            if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) sign = src_[q++];
            q = skip_space(q);
            if (src_.compare(q, 6, "endraw") != 0) continue;
            q = skip_space(q + 6);
            char end_sign = 0;
            if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) end_sign = src_[q++];
            if (src_.compare(q, 2, "%}") != 0) continue;
            std::string text = src_.substr(body, open - body);
            strip_before_tag(text, sign, true);
            if (!text.empty()) emit(TokenType::Data, std::move(text), line_);
            advance_to(q);
            finish_tag(q + 2, end_sign, true);
            return true;
        }
        fail("missing {% endraw %} for this {% raw %}");
    }

    void lex_tag_body(bool block) {
        const std::string_view close = block ? "%}" : "}}";
        std::string balance;  // closing brackets we still expect
        while (true) {
            if (pos_ >= src_.size()) fail("unexpected end of template: missing '" + std::string(close) + "'");
            if (balance.empty()) {
                if (block && src_.compare(pos_, 3, "+%}") == 0) {
                    emit(TokenType::BlockEnd, "%}", line_);
                    finish_tag(pos_ + 3, '+', true);
                    return;
                }
                if (src_[pos_] == '-' && src_.compare(pos_ + 1, 2, close) == 0) {
                    emit(block ? TokenType::BlockEnd : TokenType::VariableEnd, std::string(close), line_);
                    finish_tag(pos_ + 3, '-', block);
                    return;
                }
                if (src_.compare(pos_, 2, close) == 0) {
                    emit(block ? TokenType::BlockEnd : TokenType::VariableEnd, std::string(close), line_);
                    finish_tag(pos_ + 2, 0, block);
                    return;
                }
            }
            const char c = src_[pos_];
            size_t next = pos_;
            if (text::is_space(text::next_code_point(src_, next))) advance_to(next);
            else if (is_digit(c)) lex_number();
            else if (is_name_start(c)) lex_name();
            else if (c == '\'' || c == '"') lex_string();
            else lex_operator(balance);
        }
    }

    void lex_name() {
        size_t end = pos_;
        while (end < src_.size() && is_name_char(src_[end])) ++end;
        emit(TokenType::Name, src_.substr(pos_, end - pos_), line_);
        advance_to(end);
    }

    size_t scan_digits(size_t p) const {  // digits with single underscores between them
        while (p < src_.size() && (is_digit(src_[p]) || (src_[p] == '_' && p + 1 < src_.size() && is_digit(src_[p + 1]))))
            ++p;
        return p;
    }

    void lex_number() {
        size_t end = scan_digits(pos_);
        bool is_float = false;
        const bool after_dot = pos_ > 0 && src_[pos_ - 1] == '.';  // x.0.1 is two lookups, not 0.1
        if (!after_dot && end + 1 < src_.size() && src_[end] == '.' && is_digit(src_[end + 1])) {
            end = scan_digits(end + 1);
            is_float = true;
        }
        if (!after_dot && end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
            size_t p = end + 1;
            if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
            if (p < src_.size() && is_digit(src_[p])) {
                end = scan_digits(p);
                is_float = true;
            }
        }
        std::string digits;
        for (size_t i = pos_; i < end; ++i)
            if (src_[i] != '_') digits.push_back(src_[i]);
        Token t{is_float ? TokenType::Float : TokenType::Integer, src_.substr(pos_, end - pos_), line_};
        if (is_float) {
            t.number = std::strtod(digits.c_str(), nullptr);
        } else {
            const auto res = std::from_chars(digits.data(), digits.data() + digits.size(), t.integer);
            if (res.ec != std::errc()) fail("integer literal too large: " + digits);
        }
        tokens_.push_back(std::move(t));
        advance_to(end);
    }

    static int hex_value(char c) {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    }

    // A string literal, decoded as Python's unicode-escape does it (jinja2's way).
    void lex_string() {
        const char quote = src_[pos_];
        size_t end = pos_ + 1;
        while (end < src_.size() && src_[end] != quote) end += src_[end] == '\\' ? 2 : 1;
        if (end >= src_.size()) fail("unterminated string literal");
        const std::string_view raw = std::string_view(src_).substr(pos_ + 1, end - pos_ - 1);
        std::string value;
        for (size_t i = 0; i < raw.size(); ++i) {
            if (raw[i] != '\\' || i + 1 >= raw.size()) {
                value.push_back(raw[i]);
                continue;
            }
            const char e = raw[++i];
            switch (e) {
                case '\n': break;  // line continuation
                case '\\': value.push_back('\\'); break;
                case '\'': value.push_back('\''); break;
                case '"': value.push_back('"'); break;
                case 'a': value.push_back('\a'); break;
                case 'b': value.push_back('\b'); break;
                case 'f': value.push_back('\f'); break;
                case 'n': value.push_back('\n'); break;
                case 'r': value.push_back('\r'); break;
                case 't': value.push_back('\t'); break;
                case 'v': value.push_back('\v'); break;
                case 'x':
                case 'u':
                case 'U': {
                    const size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
                    char32_t cp = 0;
                    for (size_t k = 1; k <= digits; ++k) {
                        const int h = i + k < raw.size() ? hex_value(raw[i + k]) : -1;
                        if (h < 0) fail(std::string("truncated \\") + e + " escape in string literal");
                        cp = cp * 16 + static_cast<char32_t>(h);
                    }
                    if (cp > 0x10FFFF) fail("illegal Unicode character in string literal");
                    text::append_utf8(value, cp);
                    i += digits;
                    break;
                }
                default:
                    if (e >= '0' && e <= '7') {
                        char32_t cp = static_cast<char32_t>(e - '0');
                        for (int k = 0; k < 2 && i + 1 < raw.size() && raw[i + 1] >= '0' && raw[i + 1] <= '7'; ++k)
                            cp = cp * 8 + static_cast<char32_t>(raw[++i] - '0');
                        text::append_utf8(value, cp);
                    } else {
                        value.push_back('\\');  // an unknown escape stays as written
                        value.push_back(e);
                    }
            }
        }
        emit(TokenType::String, std::move(value), line_);
        advance_to(end + 1);
    }

    void lex_operator(std::string& balance) {
        static constexpr std::string_view kTwoChar[] = {"//", "**", "==", "!=", "<=", ">="};
        for (std::string_view op : kTwoChar) {
            if (src_.compare(pos_, 2, op) == 0) {
                emit(TokenType::Operator, std::string(op), line_);
                advance_to(pos_ + 2);
                return;
            }
        }
        const char c = src_[pos_];
        if (std::string_view("+-/*%~[](){}<>=.:|,;").find(c) == std::string_view::npos) {
            size_t next = pos_;
            std::string ch;
            text::append_utf8(ch, text::next_code_point(src_, next));
            fail("unexpected character '" + ch + "'");
        }
        if (c == '(') balance.push_back(')');
        if (c == '[') balance.push_back(']');
        if (c == '{') balance.push_back('}');
        if (c == ')' || c == ']' || c == '}') {
            if (balance.empty()) fail(std::string("unexpected '") + c + "'");
            if (balance.back() != c) fail(std::string("unexpected '") + c + "', expected '" + balance.back() + "'");
            balance.pop_back();
        }
        emit(TokenType::Operator, std::string(1, c), line_);
        advance_to(pos_ + 1);
    }

    std::string src_;
    size_t pos_ = 0;
    int line_ = 1;
    bool line_starting_ = true;  // the last tag ended a line (or nothing came yet)
    std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(normalize_newlines(source)).run(); }

}  // namespace minfer::jinja
