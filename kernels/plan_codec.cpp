#include "kernels/plan_codec.h"

#include <array>
#include <stdexcept>

namespace minfer {

namespace {

// The plan's arrays, in their order on the wire.
template <class Plan>
auto arrays(Plan& p) {
    return std::array{&p.token_ids,    &p.positions,    &p.slot_mapping, &p.query_start,
                      &p.context_lens, &p.block_tables, &p.logits_rows,  &p.block_copies};
}

}  // namespace

std::vector<int32_t> encode_plan(const StepPlan& plan) {
    const auto parts = arrays(plan);
    size_t total = 1 + parts.size();
    for (const auto* a : parts) total += a->size();
    std::vector<int32_t> out;
    out.reserve(total);
    out.push_back(plan.max_blocks_per_seq);
    for (const auto* a : parts) out.push_back(int32_t(a->size()));
    for (const auto* a : parts) out.insert(out.end(), a->begin(), a->end());
    return out;
}

StepPlan decode_plan(std::span<const int32_t> data) {
    StepPlan plan;
    auto parts = arrays(plan);
    if (data.size() < 1 + parts.size()) throw std::invalid_argument("decode_plan: too short for a plan's header");
    plan.max_blocks_per_seq = data[0];
    size_t at = 1 + parts.size();
    for (size_t i = 0; i < parts.size(); ++i) {
        const int32_t n = data[1 + i];
        if (n < 0 || size_t(n) > data.size() - at) throw std::invalid_argument("decode_plan: an array runs past the end");
        parts[i]->assign(data.begin() + at, data.begin() + at + n);
        at += size_t(n);
    }
    if (at != data.size()) throw std::invalid_argument("decode_plan: bytes left over after the plan");
    return plan;
}

}  // namespace minfer
