// Dispatch on host tensors: the pinned kernel on the CPU interpreter; the fallback is the
// operator's framework operator on host tensors (Operator::run_host_framework: by default the
// fp64 reference, rounded once into the outputs' dtype).
#pragma once
#include <vector>

#include "ops/Operator.h"

namespace tp::dispatch {

/// Runs `prog`'s steps over their whole grids on `args` (parameter order). Only outputs are
/// written.
void run_interpreter(const ops::KernelProgram& prog, const std::vector<HostTensor*>& args);

/// The operator's host framework for `p` on `args` (parameter order; outputs written).
void run_host_framework(const ops::Problem& p, const std::vector<HostTensor*>& args);

} // namespace tp::dispatch
