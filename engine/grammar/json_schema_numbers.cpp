// A bounded number is its sign, then a magnitude between two non-negative
// bounds: the integer part against the bounds' integer parts (integer_range.h),
// and where it equals one of them, the fraction's digits against the bound's,
// compared as digit strings padded with zeros (0.15 < 0.2 as "15" < "2").
#include "engine/grammar/json_schema_numbers.h"

#include <charconv>
#include <cstdint>
#include <vector>

#include "engine/grammar/integer_range.h"
#include "engine/grammar/json_schema_strings.h"

namespace minfer::grammar {

namespace json = boost::json;

namespace {

constexpr size_t kMaxWholeDigits = 16;  // below 9e15: integer_range's int64 holds it
constexpr size_t kMaxFractionDigits = 40;

Decimal from_text(const std::string& text, const std::string& at) {
    // [-]digits[.digits][e[+-]digits], as std::to_chars and std::to_string write it.
    Decimal d;
    size_t i = 0;
    bool negative = false;
    if (i < text.size() && text[i] == '-') negative = true, ++i;
    std::string digits;
    int point = -1;  // digits before the point
    for (; i < text.size() && text[i] != 'e' && text[i] != 'E'; ++i) {
        if (text[i] == '.') point = int(digits.size());
        else digits += text[i];
    }
    if (point < 0) point = int(digits.size());
    if (i < text.size()) point += std::stoi(text.substr(i + 1));
    if (point > int(kMaxWholeDigits) + 4) schema_error(at, "a bound of 9e15 or more is not supported");
    if (point < 0) digits.insert(0, size_t(-point), '0'), point = 0;
    if (point > int(digits.size())) digits.append(size_t(point) - digits.size(), '0');
    d.whole = digits.substr(0, size_t(point));
    d.fraction = digits.substr(size_t(point));
    d.whole.erase(0, d.whole.find_first_not_of('0'));
    if (d.whole.empty()) d.whole = "0";
    d.fraction.erase(d.fraction.find_last_not_of('0') + 1);
    if (d.whole.size() > kMaxWholeDigits || (d.whole.size() == kMaxWholeDigits && d.whole >= "9000000000000000"))
        schema_error(at, "a bound of 9e15 or more is not supported");
    if (d.fraction.size() > kMaxFractionDigits) schema_error(at, "a bound with more than 40 decimals is not supported");
    d.negative = negative && (d.whole != "0" || !d.fraction.empty());
    return d;
}

int compare_magnitudes(const Decimal& a, const Decimal& b) {
    if (a.whole.size() != b.whole.size()) return a.whole.size() < b.whole.size() ? -1 : 1;
    if (a.whole != b.whole) return a.whole < b.whole ? -1 : 1;
    if (a.fraction != b.fraction) return a.fraction < b.fraction ? -1 : 1;  // no trailing zeros: as strings
    return 0;
}

std::string digits(char lo, char hi) {
    if (lo == hi) return std::string("\"") + lo + "\"";
    return std::string("[") + lo + "-" + hi + "]";
}

std::string join(const std::vector<std::string>& alts) {
    std::string s = "(";
    for (size_t i = 0; i < alts.size(); ++i) s += (i ? " | " : "") + alts[i];
    return s + ")";
}

// Digit strings G (the fraction after the point), by the value of 0.G: whether
// the empty string is one (no fraction: 0), and the others, each a GBNF
// alternative that begins with a digit.
struct Digits {
    bool empty = false;
    std::vector<std::string> alts;
    bool none() const { return !empty && alts.empty(); }
};

// `c` followed by a member of `rest`.
void prefixed(Digits& out, char c, const Digits& rest) {
    if (rest.none()) return;
    if (rest.alts.empty()) {
        out.alts.push_back(digits(c, c));
        return;
    }
    out.alts.push_back(digits(c, c) + " " + join(rest.alts) + (rest.empty ? "?" : ""));
}

// 0.G >= 0.D (> when strict); D has no trailing zeros.
Digits at_least(std::string_view d, bool strict) {
    Digits out;
    if (d.empty()) {
        if (strict) {
            out.alts.push_back("[0-9]* [1-9] [0-9]*");  // anything but zero
        } else {
            out.empty = true;
            out.alts.push_back("[0-9]+");
        }
        return out;
    }
    // D > 0, so the empty G (0) is below it.
    if (d[0] < '9') out.alts.push_back(digits(char(d[0] + 1), '9') + " [0-9]*");
    prefixed(out, d[0], at_least(d.substr(1), strict));
    return out;
}

// 0.G <= 0.D (< when strict).
Digits at_most(std::string_view d, bool strict) {
    Digits out;
    if (d.empty()) {
        if (!strict) {
            out.empty = true;
            out.alts.push_back("\"0\"+");
        }
        return out;
    }
    out.empty = true;  // 0 < 0.D
    if (d[0] > '0') out.alts.push_back(digits('0', char(d[0] - 1)) + " [0-9]*");
    prefixed(out, d[0], at_most(d.substr(1), strict));
    return out;
}

// 0.A <= 0.G <= 0.B (either strict); 0.A <= 0.B.
Digits between(std::string_view a, std::string_view b, bool sa, bool sb) {
    if (a.empty() && !sa) return at_most(b, sb);
    Digits out;
    if (b.empty()) {  // then A is empty too: [0, 0] with an end left out
        return out;
    }
    const char x = a.empty() ? '0' : a[0], y = b[0];
    const std::string_view a1 = a.empty() ? a : a.substr(1), b1 = b.substr(1);
    if (x == y) {
        prefixed(out, x, between(a1, b1, sa, sb));
        return out;
    }
    prefixed(out, x, at_least(a1, sa));
    if (x + 1 <= y - 1) out.alts.push_back(digits(char(x + 1), char(y - 1)) + " [0-9]*");
    prefixed(out, y, at_most(b1, sb));
    return out;
}

// A fraction part (".G" or none) of the digits; nullopt when none may come.
std::optional<std::string> fraction(const Digits& g) {
    if (g.none()) return std::nullopt;
    if (g.alts.empty()) return "";
    return "( \".\" " + join(g.alts) + " )" + (g.empty ? "?" : "");
}

int64_t whole_of(const Decimal& d) { return std::stoll(d.whole); }

// Magnitudes (no sign) from lo to hi, both non-negative; hi absent: no end.
void magnitude(const NumberBound& lo, const std::optional<NumberBound>& hi, std::vector<std::string>& out) {
    const int64_t li = whole_of(lo.value);
    const std::string any_fraction = " ( \".\" [0-9]+ )?";
    auto with = [&](int64_t whole, const std::optional<std::string>& frac) {
        if (frac) out.push_back("\"" + std::to_string(whole) + "\"" + (frac->empty() ? "" : " " + *frac));
    };
    if (!hi) {
        with(li, fraction(at_least(lo.value.fraction, lo.exclusive)));
        out.push_back(integer_range_gbnf(li + 1, std::nullopt) + any_fraction);
        return;
    }
    const int64_t hi_whole = whole_of(hi->value);
    if (li == hi_whole) {
        with(li, fraction(between(lo.value.fraction, hi->value.fraction, lo.exclusive, hi->exclusive)));
        return;
    }
    with(li, fraction(at_least(lo.value.fraction, lo.exclusive)));
    if (li + 1 <= hi_whole - 1) out.push_back(integer_range_gbnf(li + 1, hi_whole - 1) + any_fraction);
    with(hi_whole, fraction(at_most(hi->value.fraction, hi->exclusive)));
}

}  // namespace

Decimal schema_decimal(const json::value& v, const std::string& at) {
    if (v.is_int64()) return from_text(std::to_string(v.get_int64()), at);
    if (v.is_uint64()) return from_text(std::to_string(v.get_uint64()), at);
    if (!v.is_double()) schema_error(at, "a bound must be a number");
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v.get_double());
    return from_text(std::string(buf, r.ptr), at);
}

int compare(const Decimal& a, const Decimal& b) {
    if (a.negative != b.negative) return a.negative ? -1 : 1;
    const int m = compare_magnitudes(a, b);
    return a.negative ? -m : m;
}

namespace {

// d × 10^k; nullopt when its integer part would pass 15 digits (integer_range's int64).
std::optional<Decimal> shifted(const Decimal& d, int k) {
    std::string digits = d.whole + d.fraction;
    int point = int(d.whole.size()) + k;
    if (point < 0) digits.insert(0, size_t(-point), '0'), point = 0;
    if (point > int(digits.size())) digits.append(size_t(point) - digits.size(), '0');
    Decimal out{d.negative, digits.substr(0, size_t(point)), digits.substr(size_t(point))};
    out.whole.erase(0, out.whole.find_first_not_of('0'));
    if (out.whole.empty()) out.whole = "0";
    out.fraction.erase(out.fraction.find_last_not_of('0') + 1);
    if (out.whole.size() > 15) return std::nullopt;
    return out;
}

// The numbers between the bounds written without an exponent.
std::optional<std::string> plain_range(const std::optional<NumberBound>& lo, const std::optional<NumberBound>& hi) {
    const Decimal zero;
    std::vector<std::string> alts;
    // Negatives (and "-0", which is 0): -y for y from max(0, -hi) to -lo.
    const bool below_zero = !lo || lo->value.negative || (compare(lo->value, zero) == 0 && !lo->exclusive);
    if (below_zero) {
        NumberBound y_lo{zero, false};
        if (hi && (hi->value.negative || compare(hi->value, zero) == 0)) y_lo = {Decimal{false, hi->value.whole, hi->value.fraction}, hi->exclusive};
        std::optional<NumberBound> y_hi;
        if (lo) y_hi = NumberBound{Decimal{false, lo->value.whole, lo->value.fraction}, lo->exclusive};
        std::vector<std::string> magnitudes;
        magnitude(y_lo, y_hi, magnitudes);
        if (!magnitudes.empty()) alts.push_back("\"-\" " + join(magnitudes));
    }
    // Non-negatives from max(0, lo) to hi.
    const bool above_zero = !hi || (!hi->value.negative && (compare(hi->value, zero) > 0 || !hi->exclusive));
    if (above_zero) {
        const NumberBound from = lo && !lo->value.negative ? *lo : NumberBound{zero, false};
        magnitude(from, hi, alts);
    }
    if (alts.empty()) return std::nullopt;
    return join(alts);
}

}  // namespace

std::optional<std::string> number_range_gbnf(const std::optional<NumberBound>& lo, const std::optional<NumberBound>& hi) {
    if (lo && hi) {
        const int c = compare(lo->value, hi->value);
        if (c > 0 || (c == 0 && (lo->exclusive || hi->exclusive))) return std::nullopt;
    }
    std::vector<std::string> alts;
    if (auto plain = plain_range(lo, hi)) alts.push_back(*plain);
    // m×10^e for e in [-kMaxExponent, kMaxExponent]: m between the bounds × 10^-e,
    // the exponent's digits with any leading zeros.
    for (int e = -kMaxExponent; e <= kMaxExponent; ++e) {
        std::optional<NumberBound> l, h;
        if (lo) {
            const std::optional<Decimal> d = shifted(lo->value, -e);
            if (!d) continue;
            l = NumberBound{*d, lo->exclusive};
        }
        if (hi) {
            const std::optional<Decimal> d = shifted(hi->value, -e);
            if (!d) continue;
            h = NumberBound{*d, hi->exclusive};
        }
        const std::optional<std::string> m = plain_range(l, h);
        if (!m) continue;
        const std::string digit(1, char('0' + (e < 0 ? -e : e)));
        const std::string exponent = e == 0 ? "[-+]? \"0\"+" : e > 0 ? "\"+\"? \"0\"* \"" + digit + "\"" : "\"-\" \"0\"* \"" + digit + "\"";
        alts.push_back(*m + " [eE] " + exponent);
    }
    if (alts.empty()) return std::nullopt;
    return join(alts);
}

}  // namespace minfer::grammar
