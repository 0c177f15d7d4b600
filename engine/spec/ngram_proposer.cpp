#include "engine/spec/ngram_proposer.h"

#include <algorithm>

namespace minfer {

std::vector<int32_t> ngram_propose(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n, int32_t k) {
    const int64_t len = int64_t(tokens.size());
    if (k <= 0 || min_n <= 0) return {};
    for (int64_t n = std::min<int64_t>(max_n, len - 1); n >= min_n; --n) {
        const std::span<const int32_t> suffix = tokens.last(size_t(n));
        // Latest start first: recent text predicts what comes next best. A
        // match must leave at least one token after it, so it ends before len.
        for (int64_t start = len - n - 1; start >= 0; --start) {
            if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
            const int64_t from = start + n, to = std::min<int64_t>(from + k, len);
            return {tokens.begin() + from, tokens.begin() + to};
        }
    }
    return {};
}

}  // namespace minfer
