// StepPacer: sizes each step's token budget so that a step takes about a
// target time on this machine, from the steps it has timed.
//
// vLLM's max_num_batched_tokens (2,048 by default) is sized for GPUs, where
// such a step takes milliseconds. On two CPU cores it takes seconds, and every
// stream waits for it: one long prompt stalls everyone. The pacer fits
// seconds = fixed + per_token * tokens over recent steps (least squares,
// older steps weighing less, so the cost of attention over a growing context
// is followed) and gives the step the tokens that fit the target; one prompt
// among others gets half of them (StepBudget::prefill_chunk), so a short
// prompt is admitted beside a long one. It never offers more than twice the
// largest step it has timed: a fit over steps of 1 to 5 tokens, its times
// jittered by another process, can put the cost of a token near zero, and
// one long prompt would then take the whole budget in a single step of
// seconds (CI saw 2.5 s against a 100 ms target).
#pragma once

#include <cstdint>

#include "scheduler/scheduler.h"

namespace minfer {

class StepPacer {
public:
    // target_seconds <= 0: no pacing, every step may take max_tokens.
    StepPacer(double target_seconds, int32_t max_tokens);

    StepBudget next() const;
    // A step of `tokens` rows took `seconds` (scheduling to outputs).
    void observe(int32_t tokens, double seconds);

    bool enabled() const { return target_ > 0; }
    double seconds_per_token() const { return per_token_; }
    double fixed_seconds() const { return fixed_; }

    static constexpr int32_t kMinTokens = 16;    // the least a step takes: progress before speed
    static constexpr int32_t kFirstTokens = 64;  // before any step is timed

private:
    double target_;
    int32_t max_tokens_;
    // Weighted sums of the observations (x = tokens, y = seconds), each step
    // multiplying the old weights by kDecay.
    static constexpr double kDecay = 0.9;
    double w_ = 0, x_ = 0, y_ = 0, xx_ = 0, xy_ = 0;
    double fixed_ = 0, per_token_ = 0;
    int32_t largest_ = 0;  // the most tokens of a step timed so far
};

}  // namespace minfer
