// The compile driver of the CUDA backend: the ordered pass list (src/passes) and the emitter
// (src/codegen/cuda), above both (Lower.cpp). TILEPILOT_DEBUG_IR=1 prints the IR after each
// pass to stderr.
#pragma once
#include "codegen/cuda/LoweredKernel.h"

namespace tp::cuda {

/// Lowers `k` for `t` through the pass list in src/passes (see Lower.cpp) and emits CUDA C++.
LoweredKernel lower_kernel(const Kernel& k, const passes::Target& t);

} // namespace tp::cuda
