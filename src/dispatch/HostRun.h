// Dispatch on host tensors: the pinned kernel on the CPU interpreter, the fallback as the
// operator's fp64 reference (rounded once into the output dtype).
#pragma once
#include <vector>

#include "ops/Operator.h"

namespace tp::dispatch {

/// Runs `k` over its whole grid on `args` (parameter order). Inputs are only read.
void run_interpreter(const Kernel& k, const std::vector<const HostTensor*>& inputs,
                     HostTensor& out);

/// The operator's fp64 reference for `p` on `inputs` (gemm: A, B; attention: Q, K, V), stored
/// into `out` rounded to its dtype.
void run_host_reference(const ops::Problem& p, const std::vector<const HostTensor*>& inputs,
                        HostTensor& out);

} // namespace tp::dispatch
