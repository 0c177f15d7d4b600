// The step plan on the wire (kernels/plan_codec.h): what rank 0 sends is what the other ranks run.
#include <doctest/doctest.h>

#include <stdexcept>

#include "kernels/plan_codec.h"

using namespace minfer;

TEST_CASE("plan codec: a plan comes back whole, and a damaged array is refused") {
    StepPlan p;
    p.token_ids = {1, 5, 9, 7};
    p.positions = {0, 1, 2, 6};
    p.slot_mapping = {0, 1, 2, 22};
    p.query_start = {0, 3, 4};
    p.context_lens = {3, 7};
    p.max_blocks_per_seq = 2;
    p.block_tables = {0, -1, 4, 5};
    p.logits_rows = {2, 3, 3};
    p.block_copies = {4, 6};
    const std::vector<int32_t> wire = encode_plan(p);
    const StepPlan q = decode_plan(wire);
    CHECK(q.token_ids == p.token_ids);
    CHECK(q.positions == p.positions);
    CHECK(q.slot_mapping == p.slot_mapping);
    CHECK(q.query_start == p.query_start);
    CHECK(q.context_lens == p.context_lens);
    CHECK(q.max_blocks_per_seq == p.max_blocks_per_seq);
    CHECK(q.block_tables == p.block_tables);
    CHECK(q.logits_rows == p.logits_rows);
    CHECK(q.block_copies == p.block_copies);
    CHECK(decode_plan(encode_plan(StepPlan{})).token_ids.empty());

    CHECK_THROWS_AS(decode_plan(std::span(wire).first(5)), std::invalid_argument);         // header cut
    CHECK_THROWS_AS(decode_plan(std::span(wire).first(wire.size() - 1)), std::invalid_argument);  // array cut
    std::vector<int32_t> longer = wire;
    longer.push_back(0);
    CHECK_THROWS_AS(decode_plan(longer), std::invalid_argument);  // left over
    std::vector<int32_t> negative = wire;
    negative[1] = -1;
    CHECK_THROWS_AS(decode_plan(negative), std::invalid_argument);
}
