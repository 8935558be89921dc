// The lowered body of a kernel, as the compiler's passes produce it for one target: layouts,
// the pipeline plan and its TMA stores, shared memory, then lowering to per-thread statements. For
// pass tests that check what lowering decided (which calls, stores and variables the body has).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <tilepilot/tilepilot.h>

#include "passes/InferLayouts.h"
#include "passes/LowerTileOps.h"
#include "passes/PlanPipeline.h"
#include "passes/PlanSharedMemory.h"

namespace tp::testing {

/// `paired_params` and `write_notes`, when given, receive the LowerContext's (the parameters
/// that take paired stores; what each loop's element writes became).
inline ir::Stmt lowered_body(const Kernel& kernel, const passes::Target& t,
                             uint64_t* paired_params = nullptr,
                             std::vector<std::string>* write_notes = nullptr) {
  const ir::KernelNode& k = kernel.node();
  passes::LayoutInfo l = passes::infer_layouts(k, t);
  passes::PipelinePlan p = passes::plan_pipeline(k, l, t);
  passes::plan_tma_stores(k, l, t, p);
  passes::SmemPlan s = passes::plan_shared_memory(k, l, p, t);
  passes::LowerContext cx(k, t, l, p, s);
  ir::Stmt body = passes::lower_tile_ops(cx);
  if (paired_params) *paired_params = cx.paired_params;
  if (write_notes) *write_notes = cx.write_notes;
  return body;
}

} // namespace tp::testing
