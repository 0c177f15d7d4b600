#include "engine/grammar/gbnf.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>

namespace minfer::grammar {

GrammarError::GrammarError(int line, int column, const std::string& message)
    : std::runtime_error(line > 0 ? "line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + message
                                  : message),
      line_(line),
      column_(column) {}

int32_t next_code_point(std::string_view text, size_t& pos) {
    if (pos >= text.size()) return -1;
    const uint8_t c = uint8_t(text[pos]);
    const int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || pos + size_t(len) > text.size()) return -1;
    uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (int i = 1; i < len; ++i) {
        const uint8_t b = uint8_t(text[pos + size_t(i)]);
        if ((b & 0xC0) != 0x80) return -1;
        cp = (cp << 6) | (b & 0x3F);
    }
    pos += size_t(len);
    return int32_t(cp);
}

bool CharClass::contains(uint32_t cp) const { return intersects(cp, cp); }

bool CharClass::intersects(uint32_t lo, uint32_t hi) const {
    // The first range that ends at or after lo.
    auto it = std::lower_bound(ranges.begin(), ranges.end(), lo,
                               [](const std::pair<uint32_t, uint32_t>& r, uint32_t v) { return r.second < v; });
    return it != ranges.end() && it->first <= hi;
}

void CharClass::normalize(bool negate) {
    std::sort(ranges.begin(), ranges.end());
    std::vector<std::pair<uint32_t, uint32_t>> merged;
    for (const auto& r : ranges) {
        if (!merged.empty() && r.first <= merged.back().second + 1)
            merged.back().second = std::max(merged.back().second, r.second);
        else
            merged.push_back(r);
    }
    if (negate) {
        std::vector<std::pair<uint32_t, uint32_t>> out;
        uint32_t next = 0;
        for (const auto& r : merged) {
            if (r.first > next) out.push_back({next, r.first - 1});
            next = r.second + 1;
        }
        if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
        merged = std::move(out);
    }
    ranges = std::move(merged);
}

namespace {

// Recursive descent over the source, one pass; rule references are resolved
// by name at the end.
class Parser {
public:
    explicit Parser(std::string_view src) : src_(src) {}

    Grammar parse() {
        skip_space(true);
        while (pos_ < src_.size()) {
            parse_rule();
            skip_space(true);
        }
        resolve();
        return std::move(g_);
    }

private:
    [[noreturn]] void fail(const std::string& message, size_t at) const {
        int line = 1, column = 1;
        for (size_t i = 0; i < at && i < src_.size(); ++i) {
            if (src_[i] == '\n') ++line, column = 1;
            else if ((uint8_t(src_[i]) & 0xC0) != 0x80) ++column;  // columns count characters
        }
        throw GrammarError(line, column, message);
    }
    [[noreturn]] void fail(const std::string& message) const { fail(message, pos_); }

    bool at_end() const { return pos_ >= src_.size(); }
    char peek() const { return at_end() ? '\0' : src_[pos_]; }

    // Spaces, tabs and comments; newlines too when `newlines`.
    void skip_space(bool newlines) {
        while (!at_end()) {
            const char c = src_[pos_];
            if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
                ++pos_;
            } else if (c == '#') {
                while (!at_end() && src_[pos_] != '\n') ++pos_;
            } else {
                break;
            }
        }
    }

    static bool name_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    }
    std::string parse_name() {
        const size_t start = pos_;
        while (!at_end() && name_char(src_[pos_])) ++pos_;
        if (pos_ == start) fail("expected a rule name");
        return std::string(src_.substr(start, pos_ - start));
    }

    int32_t rule_index(const std::string& name) {
        auto [it, added] = index_.try_emplace(name, int32_t(g_.rules.size()));
        if (added) g_.rules.push_back({name, {}});
        return it->second;
    }
    int32_t helper_rule(const std::string& base) {
        const int32_t i = int32_t(g_.rules.size());
        g_.rules.push_back({base + "_" + std::to_string(helpers_++), {}});
        return i;
    }
    Symbol add_class(CharClass c) {
        g_.classes.push_back(std::move(c));
        return {Symbol::Kind::Char, int32_t(g_.classes.size() - 1)};
    }

    void parse_rule() {
        const size_t start = pos_;
        const std::string name = parse_name();
        skip_space(false);
        if (src_.substr(pos_, 3) != "::=") fail("expected '::=' after the rule name '" + name + "'");
        pos_ += 3;
        skip_space(true);
        const int32_t r = rule_index(name);
        if (defined_.count(r)) fail("rule '" + name + "' is defined twice", start);
        defined_[r] = start;
        current_ = name;
        g_.rules[size_t(r)].alternatives = parse_alternatives(false);
        if (!at_end() && peek() != '\n') fail(std::string("unexpected '") + peek() + "'");
    }

    std::vector<Sequence> parse_alternatives(bool nested) {
        std::vector<Sequence> alts;
        alts.push_back(parse_sequence(nested));
        while (peek() == '|') {
            ++pos_;
            skip_space(true);
            alts.push_back(parse_sequence(nested));
        }
        return alts;
    }

    Sequence parse_sequence(bool nested) {
        Sequence seq;
        while (!at_end()) {
            const char c = peek();
            if (c == '|' || c == ')' || c == '\n') break;
            const size_t element_start = seq.size();
            if (c == '"') {
                parse_string(seq);
            } else if (c == '[') {
                seq.push_back(add_class(parse_class()));
            } else if (c == '.') {
                ++pos_;
                CharClass any;
                any.ranges = {{0, kMaxCodePoint}};
                seq.push_back(add_class(std::move(any)));
            } else if (c == '(') {
                if (++depth_ > kMaxDepth) fail("groups nested deeper than " + std::to_string(kMaxDepth));
                ++pos_;
                skip_space(true);
                const int32_t h = helper_rule(current_);
                auto alts = parse_alternatives(true);
                g_.rules[size_t(h)].alternatives = std::move(alts);
                if (peek() != ')') fail("expected ')'");
                ++pos_;
                --depth_;
                seq.push_back({Symbol::Kind::Rule, h});
            } else if (name_char(c)) {
                const size_t at = pos_;
                const int32_t r = rule_index(parse_name());
                if (!used_at_.count(r)) used_at_[r] = at;
                seq.push_back({Symbol::Kind::Rule, r});
            } else {
                fail(std::string("unexpected '") + c + "'");
            }
            skip_space(nested);
            parse_repetition(seq, element_start);
            skip_space(nested);
        }
        return seq;
    }

    // A postfix operator applies to the last element (a string's characters
    // are one element): it becomes a helper rule.
    void parse_repetition(Sequence& seq, size_t element_start) {
        const char c = peek();
        if (c != '*' && c != '+' && c != '?' && c != '{') return;
        const size_t at = pos_;
        int min = 0, max = -1;  // max -1: unbounded
        if (c == '*') {
            ++pos_;
        } else if (c == '+') {
            ++pos_, min = 1;
        } else if (c == '?') {
            ++pos_, max = 1;
        } else {
            ++pos_;
            skip_space(true);
            min = parse_int();
            skip_space(true);
            max = min;
            if (peek() == ',') {
                ++pos_;
                skip_space(true);
                max = isdigit(uint8_t(peek())) ? parse_int() : -1;
                skip_space(true);
            }
            if (peek() != '}') fail("expected '}'");
            ++pos_;
            if (max >= 0 && max < min) fail("the repetition's maximum is below its minimum", at);
            if (std::max(min, max) > 10000) fail("repetition counts above 10000 are not supported", at);
        }
        if (element_start == seq.size()) fail("nothing to repeat", at);
        const Sequence element(seq.begin() + long(element_start), seq.end());
        // Copies are made of the element: nested counts multiply, so bound the total.
        expanded_ += element.size() * size_t(std::max(min, max) + 1);
        if (expanded_ > kMaxExpandedSymbols)
            fail("the repetitions expand to more than " + std::to_string(kMaxExpandedSymbols) + " symbols", at);
        seq.resize(element_start);
        for (int i = 0; i < min; ++i) seq.insert(seq.end(), element.begin(), element.end());
        if (max < 0) {  // star ::= element star | (empty)
            const int32_t star = helper_rule(current_);
            Sequence loop = element;
            loop.push_back({Symbol::Kind::Rule, star});
            g_.rules[size_t(star)].alternatives = {loop, {}};
            seq.push_back({Symbol::Kind::Rule, star});
        } else if (max > min) {  // opt_k ::= element opt_(k-1) | (empty): up to max - min more
            int32_t tail = -1;
            for (int k = 0; k < max - min; ++k) {
                const int32_t opt = helper_rule(current_);
                Sequence more = element;
                if (tail >= 0) more.push_back({Symbol::Kind::Rule, tail});
                g_.rules[size_t(opt)].alternatives = {more, {}};
                tail = opt;
            }
            seq.push_back({Symbol::Kind::Rule, tail});
        }
    }

    int parse_int() {
        const size_t start = pos_;
        long v = 0;
        while (isdigit(uint8_t(peek())) && v <= 100000) v = v * 10 + (src_[pos_++] - '0');
        if (pos_ == start) fail("expected a number");
        return int(std::min<long>(v, 100001));
    }

    // One character of a string or class: a UTF-8 sequence or an escape.
    uint32_t parse_char() {
        if (at_end()) fail("unterminated string or class");
        const uint8_t c = uint8_t(src_[pos_]);
        if (c == '\\') {
            ++pos_;
            if (at_end()) fail("unterminated escape");
            const char e = src_[pos_++];
            switch (e) {
                case 'n': return '\n';
                case 'r': return '\r';
                case 't': return '\t';
                case '\\': case '"': case '[': case ']': case '-': case '^': case '/': return uint32_t(e);
                case 'x': return parse_hex(2);
                case 'u': return parse_hex(4);
                case 'U': return parse_hex(8);
                default: fail(std::string("unknown escape '\\") + e + "'", pos_ - 2);
            }
        }
        const int32_t cp = next_code_point(src_, pos_);
        if (cp < 0) fail("invalid UTF-8");
        return uint32_t(cp);
    }
    uint32_t parse_hex(int digits) {
        const size_t start = pos_ - 2;
        uint32_t v = 0;
        for (int i = 0; i < digits; ++i) {
            const char h = peek();
            const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
            if (d < 0) fail("expected " + std::to_string(digits) + " hex digits", start);
            v = v * 16 + uint32_t(d);
            ++pos_;
        }
        if (v > kMaxCodePoint) fail("code point beyond U+10FFFF", start);
        return v;
    }

    void parse_string(Sequence& seq) {
        ++pos_;  // "
        while (peek() != '"') {
            if (at_end() || peek() == '\n') fail("unterminated string");
            const uint32_t cp = parse_char();
            CharClass one;
            one.ranges = {{cp, cp}};
            seq.push_back(add_class(std::move(one)));
        }
        ++pos_;
    }

    CharClass parse_class() {
        const size_t start = pos_;
        ++pos_;  // [
        bool negate = false;
        if (peek() == '^') ++pos_, negate = true;
        CharClass c;
        while (peek() != ']') {
            if (at_end() || peek() == '\n') fail("unterminated character class", start);
            const uint32_t lo = parse_char();
            uint32_t hi = lo;
            if (peek() == '-' && pos_ + 1 < src_.size() && src_[pos_ + 1] != ']') {
                ++pos_;
                hi = parse_char();
                if (hi < lo) fail("a range that ends before it starts", start);
            }
            c.ranges.push_back({lo, hi});
        }
        ++pos_;
        c.normalize(negate);
        if (c.ranges.empty()) fail("a character class that matches nothing", start);
        return c;
    }

    void resolve() {
        for (const auto& [r, at] : used_at_)
            if (!defined_.count(r))
                fail("undefined rule '" + g_.rules[size_t(r)].name + "'", at);
        const auto root = index_.find("root");
        if (root == index_.end() || !defined_.count(root->second)) throw GrammarError(0, 0, "the grammar has no 'root' rule");
        g_.root = root->second;
    }

    std::string_view src_;
    size_t pos_ = 0;
    Grammar g_;
    std::map<std::string, int32_t> index_;
    std::map<int32_t, size_t> defined_, used_at_;  // rule -> where defined / first used
    std::string current_;
    int helpers_ = 0;
    static constexpr size_t kMaxExpandedSymbols = 1 << 20;
    size_t expanded_ = 0;  // symbols the repetitions copied
    static constexpr int kMaxDepth = 200;  // the parser recurses into groups
    int depth_ = 0;
};

}  // namespace

Grammar parse_gbnf(std::string_view source) { return Parser(source).parse(); }

std::string gbnf_literal(std::string_view bytes) {
    std::string out = "\"";
    for (const unsigned char c : bytes) {
        if ((c >= 0x20 && c < 0x7F && c != '"' && c != '\\') || c >= 0x80) {
            out += char(c);
        } else {
            static const char* kHex = "0123456789ABCDEF";
            out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
        }
    }
    return out + "\"";
}

}  // namespace minfer::grammar
