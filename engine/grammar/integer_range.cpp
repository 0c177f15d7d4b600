#include "engine/grammar/integer_range.h"

#include <string>
#include <vector>

namespace minfer::grammar {

namespace {

std::string digit_class(char lo, char hi) {
    if (lo == hi) return std::string("\"") + lo + "\"";
    return std::string("[") + lo + "-" + hi + "]";
}

// Numbers of x.size() digits from x to y (same length, x <= y, leading zeros allowed here).
void same_length(const std::string& x, const std::string& y, std::vector<std::string>& out, const std::string& prefix = "") {
    if (x.empty()) {
        out.push_back(prefix.empty() ? "\"\"" : prefix);
        return;
    }
    const std::string sep = prefix.empty() ? "" : " ";
    if (x[0] == y[0]) {
        same_length(x.substr(1), y.substr(1), out, prefix + sep + digit_class(x[0], x[0]));
        return;
    }
    const size_t rest = x.size() - 1;
    const bool x_low = x.substr(1) == std::string(rest, '0');
    const bool y_high = y.substr(1) == std::string(rest, '9');
    const auto any_rest = [&] { return rest ? " [0-9]{" + std::to_string(rest) + "}" : std::string(); };
    // From x[0]: the tail from x's up to all nines (unless it is all of them).
    char first = x[0];
    if (!x_low) {
        same_length(x.substr(1), std::string(rest, '9'), out, prefix + sep + digit_class(x[0], x[0]));
        ++first;
    }
    char last = y[0];
    if (!y_high) --last;
    if (first <= last) out.push_back(prefix + sep + digit_class(first, last) + any_rest());
    if (!y_high) same_length(std::string(rest, '0'), y.substr(1), out, prefix + sep + digit_class(y[0], y[0]));
}

// The non-negative integers from a to b (b absent: no end), without leading zeros.
void non_negative(uint64_t a, std::optional<uint64_t> b, std::vector<std::string>& out) {
    const std::string as = std::to_string(a);
    const size_t top = b ? std::to_string(*b).size() : as.size();
    for (size_t len = as.size(); len <= top; ++len) {
        const std::string lo = len == as.size() ? as : "1" + std::string(len - 1, '0');
        const std::string hi = b && len == top ? std::to_string(*b) : std::string(len, '9');
        if (len == 1) {
            out.push_back(digit_class(lo[0], hi[0]));
        } else {
            same_length(lo, hi, out);
        }
    }
    if (!b) out.push_back("[1-9] [0-9]{" + std::to_string(as.size()) + ",}");  // every longer number
}

std::string join(const std::vector<std::string>& alts) {
    std::string s = "(";
    for (size_t i = 0; i < alts.size(); ++i) s += (i ? " | " : "") + alts[i];
    return s + ")";
}

}  // namespace

std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi) {
    std::vector<std::string> alts;
    // Negatives: -n for n from max(1, -hi) to -lo.
    if (!lo || *lo < 0) {
        const uint64_t from = hi && *hi < 0 ? uint64_t(-(*hi + 1)) + 1 : 1;
        const std::optional<uint64_t> to = lo ? std::optional<uint64_t>(uint64_t(-(*lo + 1)) + 1) : std::nullopt;
        std::vector<std::string> magnitudes;
        non_negative(from, to, magnitudes);
        alts.push_back("\"-\" " + join(magnitudes));
    }
    // Non-negatives from max(0, lo) to hi.
    if (!hi || *hi >= 0) non_negative(lo && *lo > 0 ? uint64_t(*lo) : 0, hi ? std::optional<uint64_t>(uint64_t(*hi)) : std::nullopt, alts);
    return join(alts);
}

}  // namespace minfer::grammar
