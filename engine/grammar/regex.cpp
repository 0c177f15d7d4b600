// The regex is translated to GBNF source (the same operators, character
// classes spelled out) and compiled by parse_gbnf; errors point at the regex.
#include "engine/grammar/regex.h"

#include <cctype>
#include <cstdio>
#include <string>

#include "engine/grammar/gbnf.h"

namespace minfer::grammar {

namespace {

// The classes of \d, \w, \s and `.` as GBNF class bodies.
constexpr const char* kDigit = "0-9";
constexpr const char* kWord = "a-zA-Z0-9_";
constexpr const char* kSpace = " \\t\\n\\r\\x0B\\x0C\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000\\uFEFF";
constexpr const char* kLineBreaks = "\\n\\r\\u2028\\u2029";

class Translator {
public:
    explicit Translator(std::string_view re) : re_(re) {}

    std::string translate() { return "root ::= " + expression() + "\n"; }

    std::string expression() {
        if (peek() == '^') ++pos_;
        std::string body = alternatives();
        if (pos_ < re_.size()) fail(re_[pos_] == ')' ? "unmatched ')'" : "unexpected character");
        return body;
    }

private:
    [[noreturn]] void fail(const std::string& why) const { fail_at(pos_, why); }
    [[noreturn]] void fail_at(size_t at, const std::string& why) const { throw GrammarError(1, int(at) + 1, why); }
    char peek() const { return pos_ < re_.size() ? re_[pos_] : '\0'; }
    bool at_end() const { return pos_ >= re_.size(); }

    static std::string hex(uint32_t cp) {
        char b[16];
        std::snprintf(b, sizeof b, cp <= 0xFF ? "\\x%02X" : cp <= 0xFFFF ? "\\u%04X" : "\\U%08X", cp);
        return b;
    }
    // One code point as it is written inside a GBNF string or class.
    static std::string literal(uint32_t cp) { return cp >= 0x20 && cp < 0x7F && std::isalnum(int(cp)) ? std::string(1, char(cp)) : hex(cp); }

    std::string alternatives() {
        std::string out = "(" + sequence();
        while (peek() == '|') {
            ++pos_;
            out += " | " + sequence();
        }
        return out + ")";
    }

    std::string sequence() {
        std::string out = "\"\"";  // the empty string, so that an empty branch is a valid sequence
        while (!at_end() && peek() != '|' && peek() != ')') {
            if (peek() == '$') {
                ++pos_;
                if (!at_end() && peek() != '|' && peek() != ')') fail("'$' is supported only at the end");
                continue;
            }
            std::string atom_text = atom();
            out += " " + atom_text + quantifier();
        }
        return out;
    }

    std::string quantifier() {
        const char c = peek();
        std::string q;
        if (c == '*' || c == '+' || c == '?') {
            q = std::string(1, c);
            ++pos_;
        } else if (c == '{') {
            const size_t start = pos_;
            while (!at_end() && peek() != '}') ++pos_;
            if (at_end()) fail("unterminated '{'");
            ++pos_;
            q = std::string(re_.substr(start, pos_ - start));
            for (size_t i = 1; i + 1 < q.size(); ++i)
                if (!std::isdigit(uint8_t(q[i])) && q[i] != ',') fail("a repetition count must be {m}, {m,} or {m,n}");
        } else {
            return "";
        }
        if (peek() == '?') ++pos_;  // lazy: the same texts
        if (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{') fail("a quantifier after a quantifier");
        return q;
    }

    std::string atom() {
        const char c = peek();
        if (c == '(') {
            ++pos_;
            if (peek() == '?') {
                if (pos_ + 1 < re_.size() && re_[pos_ + 1] == ':') {
                    pos_ += 2;
                } else {
                    fail("lookaround, named groups and flags are not supported");
                }
            }
            std::string inner = alternatives();
            if (peek() != ')') fail("expected ')'");
            ++pos_;
            return inner;
        }
        if (c == '[') return char_class();
        if (c == '.') {
            ++pos_;
            return std::string("[^") + kLineBreaks + "]";
        }
        if (c == '*' || c == '+' || c == '?' || c == '{') fail("nothing to repeat");
        if (c == '^') fail("'^' is supported only at the start");
        if (c == '\\') {
            const std::string cls = class_escape();
            if (!cls.empty()) return "[" + cls + "]";
            return "\"" + literal(escape()) + "\"";
        }
        return "\"" + literal(utf8()) + "\"";
    }

    // \d \D \w \W \s \S as a class body ("^..." when negated); "" if the escape is another.
    std::string class_escape() {
        if (pos_ + 1 >= re_.size()) return "";
        const char e = re_[pos_ + 1];
        const char* body = e == 'd' || e == 'D' ? kDigit : e == 'w' || e == 'W' ? kWord : e == 's' || e == 'S' ? kSpace : nullptr;
        if (!body) return "";
        pos_ += 2;
        return std::string(std::isupper(uint8_t(e)) ? "^" : "") + body;
    }

    // One escaped code point (after class_escape said it is not a class).
    uint32_t escape() {
        const size_t at = pos_;
        ++pos_;  // backslash
        if (at_end()) fail("a pattern cannot end with a backslash");
        const char e = re_[pos_++];
        switch (e) {
            case 'n': return '\n';
            case 'r': return '\r';
            case 't': return '\t';
            case 'f': return '\f';
            case 'v': return '\v';
            case '0': return 0;
            case 'x': return hex_digits(2);
            case 'u':
                if (peek() == '{') {
                    ++pos_;
                    const size_t start = pos_;
                    while (!at_end() && std::isxdigit(uint8_t(peek()))) ++pos_;
                    if (peek() != '}' || pos_ == start || pos_ - start > 6) fail("expected \\u{hex digits}");
                    const uint32_t cp = uint32_t(std::stoul(std::string(re_.substr(start, pos_ - start)), nullptr, 16));
                    ++pos_;
                    if (cp > kMaxCodePoint) fail("code point beyond U+10FFFF");
                    return cp;
                }
                return hex_digits(4);
            case 'b': case 'B': fail_at(at, "word boundaries are not supported");
            default:
                if (std::isdigit(uint8_t(e))) fail_at(at, "backreferences are not supported");
                if (std::isalnum(uint8_t(e))) fail_at(at, std::string("unknown escape '\\") + e + "'");
                --pos_;
                return utf8();  // escaped punctuation stands for itself
        }
    }
    uint32_t hex_digits(int n) {
        uint32_t v = 0;
        for (int i = 0; i < n; ++i) {
            if (!std::isxdigit(uint8_t(peek()))) fail("expected " + std::to_string(n) + " hex digits");
            const char h = re_[pos_++];
            v = v * 16 + uint32_t(std::isdigit(uint8_t(h)) ? h - '0' : std::tolower(h) - 'a' + 10);
        }
        return v;
    }

    uint32_t utf8() {
        const int32_t cp = next_code_point(re_, pos_);
        if (cp < 0) fail("invalid UTF-8");
        return uint32_t(cp);
    }

    std::string char_class() {
        const size_t start = pos_;
        ++pos_;  // [
        std::string body;
        if (peek() == '^') {
            body = "^";
            ++pos_;
        }
        bool any = false;
        while (peek() != ']') {
            if (at_end()) {
                pos_ = start;
                fail("unterminated character class");
            }
            if (peek() == '\\') {
                const std::string cls = class_escape();
                if (!cls.empty()) {
                    if (cls[0] == '^') fail("a negated class escape inside a class is not supported");
                    body += cls;
                    any = true;
                    continue;
                }
            }
            const uint32_t lo = peek() == '\\' ? escape() : utf8();
            body += hex(lo);
            if (peek() == '-' && pos_ + 1 < re_.size() && re_[pos_ + 1] != ']') {
                ++pos_;
                const uint32_t hi = peek() == '\\' ? escape() : utf8();
                if (hi < lo) fail("a range that ends before it starts");
                body += "-" + hex(hi);
            }
            any = true;
        }
        ++pos_;
        if (!any) {
            if (body == "^") return "[\\x00-\\U0010FFFF]";  // [^]: any character at all
            fail("an empty class matches nothing");
        }
        return "[" + body + "]";
    }

    std::string_view re_;
    size_t pos_ = 0;
};

}  // namespace

std::string regex_gbnf(std::string_view pattern) { return Translator(pattern).expression(); }

Grammar regex_grammar(std::string_view pattern) {
    const std::string gbnf = Translator(pattern).translate();
    try {
        return parse_gbnf(gbnf);
    } catch (const GrammarError& e) {
        throw GrammarError(0, 0, std::string("the pattern compiles to a grammar that fails: ") + e.what());
    }
}

}  // namespace minfer::grammar
