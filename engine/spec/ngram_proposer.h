// Prompt lookup (n-gram) proposals: text that repeats itself (code being
// edited, a list continued, an answer quoting its question) is guessed from
// its own earlier tokens, at no model cost.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace minfer {

// The tokens that followed the most recent earlier occurrence of the last n
// tokens of `tokens`, for the largest n in [min_n, max_n] that has one: at
// most k of them (fewer near the end). Empty if no n matches. A proposal's
// probabilities are one-hot: it has no distribution of its own.
std::vector<int32_t> ngram_propose(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n, int32_t k);

}  // namespace minfer
