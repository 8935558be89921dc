// The compile driver of the CUDA backend: the ordered pass list (src/passes) and the emitter
// (src/codegen/cuda), above both (Lower.cpp). TILEPILOT_DEBUG_IR=1 prints the IR after each
// pass to stderr.
#pragma once
#include <vector>

#include "codegen/cuda/LoweredKernel.h"
#include "ir/ArgBinding.h"

namespace tp::cuda {

/// Lowers `k` for `t` through the pass list in src/passes (see Lower.cpp) and emits CUDA C++.
LoweredKernel lower_kernel(const Kernel& k, const passes::Target& t);
/// Of the parameters in `paired` (LoweredKernel::paired_params), those whose argument's rows
/// hold an even number of adjacent elements (passes::Target::even_rows).
uint64_t even_row_params(uint64_t paired, const std::vector<ir::ArgDesc>& args);
/// Whether TMA can address a tensor shaped `a` from a 16-byte aligned base: its row pitch is a
/// 16-byte multiple (a view: unit innermost stride, outer strides 16-byte multiples below
/// TMA's 2^40 bytes).
bool tma_rows(const ir::ArgDesc& a);
/// Of the parameters in `candidates` (LoweredKernel::tma_store_candidates), those TMA can
/// address given aligned bases (tma_rows; passes::Target::tma_store_params, other bits set).
uint64_t tma_store_params(uint64_t candidates, const std::vector<ir::ArgDesc>& args);
/// The variant a launch on contiguous tensors shaped like `args` (parameter order) takes, as
/// CudaKernel picks it at launch: `t` with TMA, unless a tensor TMA would load has rows that
/// are not 16-byte multiples (device buffers are 256-byte aligned, so rows decide); then `t`
/// without TMA. Paired stores into tensors with even rows drop their alignment tests; TMA
/// stores apply to tensors whose rows are 16-byte multiples.
LoweredKernel lower_for_shapes(const Kernel& k, passes::Target t,
                               const std::vector<ir::ArgDesc>& args);

/// What a launch of `k` on tensors shaped like `args` needs, as lower_for_shapes(k, t, args)
/// would size it, from the plans alone: tile ops are not lowered and no source is emitted, so
/// it costs a fraction of a lowering (the tuner sizes every config of its space this way).
struct LaunchResources {
  int block_threads = 0;  // consumers + producer warpgroup
  int64_t smem_bytes = 0; // dynamic shared memory
};
LaunchResources plan_for_shapes(const Kernel& k, const passes::Target& t,
                                const std::vector<ir::ArgDesc>& args);

} // namespace tp::cuda
