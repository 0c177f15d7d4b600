// A StepPlan as one array of int32, for rank 0 to send to the other ranks
// (ModelRunner, through kernels/parallel.h's Control):
// the arrays' sizes first, then the arrays back to back.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/step_plan.h"

namespace minfer {

std::vector<int32_t> encode_plan(const StepPlan& plan);
// Throws std::invalid_argument when the array is not an encoded plan.
StepPlan decode_plan(std::span<const int32_t> data);

}  // namespace minfer
