// Running a kernel program (tilepilot/operator.h) on the CPU interpreter: the steps in order
// over the call's host tensors, with host intermediates that start out NaN, so that a step
// reading what no earlier step wrote shows up in a check.
#pragma once
#include <array>
#include <vector>

#include "ops/Operator.h"

namespace tp::ops {

/// Runs `prog` on `args` (the call's arguments, arg_specs order). Every step runs its whole
/// grid, except the last, which runs `last_blocks` when given (the check's sample).
void interpret_program(const KernelProgram& prog, const std::vector<HostTensor*>& args,
                       const std::vector<std::array<int64_t, 3>>& last_blocks = {});

} // namespace tp::ops
