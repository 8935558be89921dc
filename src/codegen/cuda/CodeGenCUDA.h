// The CUDA C++ emitter: a printer over lowered IR (it derives from the IR printer). It writes
// the kernel signature (tensors, tensor maps, Dims), the shared-memory carve-up, and the body.
#pragma once
#include <string>

#include "codegen/cuda/LoweredKernel.h"
#include "ir/IRPrinter.h"
#include "passes/PlanSharedMemory.h"

namespace tp::cuda {

struct EmitInput {
  const ir::KernelNode& k;
  const ir::Stmt& lowered;
  const passes::LayoutInfo& layouts;
  const passes::PipelinePlan& plan;
  const passes::SmemPlan& smem;
  const passes::Target& target;
  int block_threads;
  std::string entry;
  std::vector<bool> param_written;
  Var tid; // the lowered IR's thread index variable
};

std::string emit_cuda(const EmitInput& in);

} // namespace tp::cuda
