// The tests' one relative-error measure: the RMS of out - ref over the RMS of
// ref, in double. Sizes that differ give infinity; NaN in either gives NaN,
// which fails any `< tol` check; an all-zero ref gives the RMS of out, so
// exact zeros pass.
#pragma once

#include <cmath>
#include <limits>
#include <vector>

namespace minfer::test {

template <class Out, class Ref>
double rel_error(const std::vector<Out>& out, const std::vector<Ref>& ref) {
    if (out.size() != ref.size()) return std::numeric_limits<double>::infinity();
    double num = 0, den = 0;
    for (size_t i = 0; i < out.size(); ++i) {
        const double d = double(out[i]) - double(ref[i]);
        num += d * d;
        den += double(ref[i]) * double(ref[i]);
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// The same over rows (logits, one row a token), all rows together as one
// vector; a different number of rows, or rows of different sizes, give infinity.
template <class Out, class Ref>
double rel_error_rows(const std::vector<std::vector<Out>>& out, const std::vector<std::vector<Ref>>& ref) {
    if (out.size() != ref.size()) return std::numeric_limits<double>::infinity();
    std::vector<Out> all_out;
    std::vector<Ref> all_ref;
    for (size_t t = 0; t < out.size(); ++t) {
        if (out[t].size() != ref[t].size()) return std::numeric_limits<double>::infinity();
        all_out.insert(all_out.end(), out[t].begin(), out[t].end());
        all_ref.insert(all_ref.end(), ref[t].begin(), ref[t].end());
    }
    return rel_error(all_out, all_ref);
}

}  // namespace minfer::test
