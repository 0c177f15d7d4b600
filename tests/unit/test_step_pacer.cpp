// StepPacer (how many tokens fit a step's target time) and the scheduler's
// StepBudget (what a step may take, and one prompt's share of it).
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "engine/core/step_pacer.h"
#include "scheduler/scheduler.h"

using namespace minfer;

TEST_CASE("step pacer: off, every step may take the whole budget") {
    const StepPacer pacer(0.0, 2048);
    CHECK_FALSE(pacer.enabled());
    CHECK(pacer.next().tokens == 2048);
    CHECK(pacer.next().prefill_chunk == 2048);
}

TEST_CASE("step pacer: learns a linear step cost and gives the tokens that fit the target") {
    StepPacer pacer(0.1, 2048);
    CHECK(pacer.next().tokens == StepPacer::kFirstTokens);  // nothing timed yet
    // Steps cost 5 ms + 0.25 ms a token: 0.1 s fits (0.1 - 0.005) / 0.00025 = 380 tokens.
    for (int32_t tokens : {64, 16, 200, 1, 120, 300, 33})
        pacer.observe(tokens, 0.005 + 0.00025 * tokens);
    CHECK(pacer.fixed_seconds() == doctest::Approx(0.005).epsilon(1e-6));
    CHECK(pacer.seconds_per_token() == doctest::Approx(0.00025).epsilon(1e-6));
    const StepBudget b = pacer.next();
    CHECK(b.tokens >= 379);
    CHECK(b.tokens <= 380);
    CHECK(b.prefill_chunk == b.tokens / 2);
}

TEST_CASE("step pacer: follows a cost that grows, and never goes below its floor or above the budget") {
    StepPacer pacer(0.1, 512);
    for (int i = 0; i < 20; ++i) pacer.observe(100 + i, 0.001 * (100 + i));  // 1 ms a token
    CHECK(pacer.next().tokens >= 99);
    CHECK(pacer.next().tokens <= 100);
    for (int i = 0; i < 60; ++i) pacer.observe(100 + i % 7, 0.1 * (100 + i % 7));  // then 100 ms a token
    CHECK(pacer.next().tokens == StepPacer::kMinTokens);
    // A fast machine: the budget doubles with each step it has timed, up to the whole of it.
    StepPacer fast(0.1, 512);
    for (int i = 0; i < 10; ++i) fast.observe(10 + i, 1e-6 * (10 + i));
    CHECK(fast.next().tokens == StepPacer::kFirstTokens);
    for (const int32_t want : {128, 256, 512, 512}) {
        fast.observe(fast.next().tokens, 1e-6 * fast.next().tokens);
        CHECK(fast.next().tokens == want);
    }
    // Equal steps cannot separate the fixed part: the mean cost of a token stands in.
    StepPacer even(0.1, 512);
    for (int i = 0; i < 10; ++i) even.observe(50, 0.05);
    const int32_t tokens = even.next().tokens;
    CHECK(tokens >= 99);
    CHECK(tokens <= 100);
    even.observe(0, 1.0);    // ignored: no tokens
    even.observe(50, -1.0);  // ignored: a clock that went back
    CHECK(even.next().tokens == tokens);
}

TEST_CASE("step pacer: a fit over small, jittered steps does not hand a long prompt the whole budget") {
    // Decodes of 1 token at 44 or 46 ms (another process shares the core) and
    // the first prompt's 5 tokens at 45.1 ms: the fit's cost of a token is
    // about 25 µs, so (0.1 - fixed) / per_token is past the budget.
    StepPacer pacer(0.1, 2048);
    pacer.observe(5, 0.0451);
    for (int i = 0; i < 12; ++i) pacer.observe(1, i % 2 ? 0.046 : 0.044);
    CHECK(pacer.seconds_per_token() < 30e-6);
    CHECK(pacer.next().tokens == StepPacer::kFirstTokens);  // not 2048
    pacer.observe(64, 0.5);  // the long prompt's first chunk, timed
    CHECK(pacer.next().tokens < 64);
}

namespace {

struct Queue {
    BlockManager blocks{256, 16};
    Scheduler scheduler;
    std::vector<std::unique_ptr<SequenceState>> seqs;
    explicit Queue(int32_t max_tokens) : scheduler({.max_num_batched_tokens = max_tokens}, blocks) {}
    SequenceState& add(int32_t prompt_tokens) {
        auto s = std::make_unique<SequenceState>();
        s->id = s->arrival = int64_t(seqs.size());
        for (int32_t i = 0; i < prompt_tokens; ++i) s->tokens.push_back(int32_t(seqs.size()) * 10000 + i);
        s->num_prompt_tokens = prompt_tokens;
        scheduler.add_waiting(s.get());
        seqs.push_back(std::move(s));
        return *seqs.back();
    }
};

int32_t rows_of(const SchedulerOutput& out, const SequenceState& s) {
    for (const auto& e : out.scheduled)
        if (e.seq == &s) return e.num_tokens;
    return 0;
}

}  // namespace

TEST_CASE("scheduler: a step budget caps the step, and one prompt's chunk only while prompts compete") {
    {
        Queue q(1024);
        SequenceState& alone = q.add(1000);
        const SchedulerOutput out = q.scheduler.schedule({.tokens = 300, .prefill_chunk = 150});
        CHECK(out.num_tokens == 300);  // alone: the whole step budget, not the chunk
        CHECK(rows_of(out, alone) == 300);
    }
    {
        Queue q(1024);
        SequenceState& long_prompt = q.add(1000);
        SequenceState& short_prompt = q.add(40);
        const SchedulerOutput out = q.scheduler.schedule({.tokens = 300, .prefill_chunk = 150});
        CHECK(rows_of(out, long_prompt) == 150);  // leaves room for the one behind it
        CHECK(rows_of(out, short_prompt) == 40);
        CHECK(out.num_tokens == 190);
    }
    {
        Queue q(256);
        q.add(1000);
        CHECK(q.scheduler.schedule({.tokens = 4096}).num_tokens == 256);  // never past max_num_batched_tokens
        Queue unpaced(256);
        unpaced.add(1000);
        CHECK(unpaced.scheduler.schedule().num_tokens == 256);
    }
}
