// Test-only fault injection (spec field `inject_fault`), for exercising the pilot's failure
// path end to end: shrinking, the reproducer folder and `tilepilot repro`. Never use it for a
// real pilot.
//
// `wrong_scale`: the operator's real kernel, built as usual, then rewritten so that every
// fragment is multiplied by 1.25 just before it is stored to a global output (every output of
// any operator comes out 1.25 times too large). The broken kernel runs through the real
// kernel path (interpreter or GPU), so the failure is produced by the kernel, not by the check;
// inputs and the reference are untouched.
#pragma once
#include <memory>

#include "ops/Operator.h"

namespace tp::pilot {

/// `base` when `fault` is empty, else an operator that delegates everything to `base` except
/// that build() returns the faulty kernel. User error for an unknown fault.
std::shared_ptr<const ops::Operator> with_fault(const ops::Operator& base,
                                                const std::string& fault);

/// The kernel with the fault applied (exposed for tests).
Kernel inject_fault(const Kernel& k, const std::string& fault);

} // namespace tp::pilot
