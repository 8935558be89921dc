// Checks whole-kernel rules that single builder calls cannot: every variable is bound (block
// index, loop counter or a Dim some parameter's shape binds), fragments are accessed only inside
// parallel, tiles are used only within the scope that allocated them, bit operators take
// integers, nothing writes an int4 buffer (int4 is read-only in kernels), and every pipelined
// loop's stated schedule fits its structure (ScheduleRules.h). Violations are user
// errors at the offending statement's source location.
#pragma once
#include "ir/IR.h"

namespace tp::ir {

void verify(const KernelNode& k);

} // namespace tp::ir
