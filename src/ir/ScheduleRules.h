// The rules a pipelined loop's stated schedule (LoopSchedule) puts on the loop's structure,
// whatever the target: checked by the verifier, so the interpreter and every backend refuse the
// same kernels. What a target must provide (TMA, wgmma) is the pipeline plan's to check
// (passes/PlanPipeline.h).
#pragma once
#include <vector>

#include "ir/IR.h"

namespace tp::ir {

/// The loop body's top-level statements other than its global-to-shared copies: the work that
/// the staged tiles feed, in program order.
std::vector<Stmt> loop_work(const For* loop);

/// The gemms anywhere in the loop's body.
int count_gemms(const For* loop);

/// User error, at the loop, when its schedule asks for what its structure cannot give.
void verify_schedule(const KernelNode& k, const For* loop);

} // namespace tp::ir
