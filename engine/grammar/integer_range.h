// The integers of a range as a GBNF expression over their decimal digits
// (JSON Schema's minimum and maximum on integers): the classic split of a
// range into runs that share leading digits, e.g. [17, 213] is
// 1[7-9] | [2-9][0-9] | 1[0-9][0-9] | 20[0-9] | 21[0-3].
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace minfer::grammar {

// Integers written as JSON writes them (no leading zeros, no "+", no "-0")
// from lo to hi, either end open when absent. lo <= hi.
std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi);

}  // namespace minfer::grammar
