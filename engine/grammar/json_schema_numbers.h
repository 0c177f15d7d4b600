// JSON Schema's minimum, maximum, exclusiveMinimum and exclusiveMaximum on
// `type: number`, as a GBNF expression over the digits: exact in decimal.
//
// Exponents: m×10^e is taken for e from -9 to 9 (one digit, after any zeros:
// "2.6E0", "26e-1", "1E+02"), each e a range of its own over m (the bounds
// shifted by -e digits, which is exact). Not for every e: whether m×10^e lies
// between two bounds depends on the exponent's value against the count of the
// mantissa's digits (0.0001e4 is 1), and no context-free grammar compares a
// decimal exponent with a count of digits. So "1e10" is refused by the grammar
// even where 10^10 is in range (a few valid texts rejected, no invalid one
// accepted, as a bounded integer already refuses 1.0). Serializers that write
// every double with an exponent (Boost.JSON: "2.6E0") stay within one digit
// for everyday magnitudes.
#pragma once

#include <boost/json.hpp>

#include <optional>
#include <string>

namespace minfer::grammar {

// A decimal number: the integer part's digits (no leading zeros; "0") and the
// fraction's (no trailing zeros; "" for none). Zero is never negative.
struct Decimal {
    bool negative = false;
    std::string whole = "0";
    std::string fraction;
};

// The decimal a schema's number stands for: an integer exactly; a double as
// the shortest decimal that reads back as it (1.1 is 1.1, as written). Throws
// the compiler's error (at `at`) for a non-number, a magnitude of 9e15 or
// more, or more than 40 fraction digits.
Decimal schema_decimal(const boost::json::value& v, const std::string& at);

// -1, 0, 1 as a < b, a == b, a > b.
int compare(const Decimal& a, const Decimal& b);

constexpr int kMaxExponent = 9;

struct NumberBound {
    Decimal value;
    bool exclusive = false;
};

// The numbers from lo to hi (either end open when absent; an exclusive end
// left out) written as JSON writes a number: "-"?, an integer part without
// leading zeros, an optional fraction of any digits ("-0" and "2.50"
// included: they are 0 and 2.5), an exponent from -kMaxExponent to
// kMaxExponent or none. nullopt when no number is between the bounds.
std::optional<std::string> number_range_gbnf(const std::optional<NumberBound>& lo, const std::optional<NumberBound>& hi);

}  // namespace minfer::grammar
