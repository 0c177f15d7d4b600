#include "engine/core/step_pacer.h"

#include <algorithm>
#include <cmath>

namespace minfer {

StepPacer::StepPacer(double target_seconds, int32_t max_tokens) : target_(target_seconds), max_tokens_(max_tokens) {}

StepBudget StepPacer::next() const {
    if (!enabled()) return {max_tokens_, max_tokens_};
    int32_t tokens = kFirstTokens;
    if (per_token_ > 0) {
        const double fit = (target_ - fixed_) / per_token_;
        tokens = fit >= max_tokens_ ? max_tokens_ : int32_t(std::max(0.0, fit));
    }
    tokens = std::min(tokens, std::max(kFirstTokens, 2 * largest_));  // no far extrapolation
    tokens = std::clamp(tokens, std::min(kMinTokens, max_tokens_), max_tokens_);
    return {tokens, std::max(1, tokens / 2)};
}

void StepPacer::observe(int32_t tokens, double seconds) {
    if (!enabled() || tokens <= 0 || !(seconds >= 0)) return;
    largest_ = std::max(largest_, tokens);
    const double x = tokens, y = seconds;
    w_ = w_ * kDecay + 1;
    x_ = x_ * kDecay + x;
    y_ = y_ * kDecay + y;
    xx_ = xx_ * kDecay + x * x;
    xy_ = xy_ * kDecay + x * y;
    const double var = xx_ * w_ - x_ * x_;
    // The steps so far differ in size enough to separate the two terms (a run
    // of equal steps, all decodes say, does not): fit both; else the mean cost
    // of a token, fixed part included, which overestimates it (the safe side).
    if (var > 1e-9 * xx_ * w_) {
        per_token_ = (xy_ * w_ - x_ * y_) / var;
        fixed_ = (y_ - per_token_ * x_) / w_;
    }
    if (!(per_token_ > 0) || fixed_ < 0) {
        per_token_ = y_ / x_;
        fixed_ = 0;
    }
}

}  // namespace minfer
