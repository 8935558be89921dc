// The schedules a kernel states (docs/schedules.md) that only the sm_90a warp-specialized
// pipeline implements: a 2-CTA cluster with TMA multicast and persistence (kernel annotations),
// ping-pong turns and the deferred last gemm (the loop's LoopSchedule), and a demand for TMA
// copies. plan_pipeline (PlanPipeline.h) collects the requests; on a target with TMA a request
// the kernel cannot meet is a user error, without TMA it is not applied.
#pragma once
#include <string>
#include <vector>

#include "ir/IR.h"
#include "passes/InferLayouts.h"
#include "passes/PlanPipeline.h"

namespace tp::passes {

/// What the kernel asks for that only the TMA warp-specialized plan implements, and where.
struct ScheduleRequests {
  std::vector<std::string> what;  // "copies = tma", "pingpong", "persistent=1", ...
  SourceLoc loc;                  // the last loop that asked, else the kernel
  bool cp_async_required = false; // some loop asks for copies = cp_async
  SourceLoc cp_async_loc;
  std::string what_text() const; // "pingpong, persistent=1"
};

ScheduleRequests schedule_requests(const ir::KernelNode& k);

/// On a plan that is warp-specialized: takes the cluster, persistence, ping-pong and deferred
/// last gemm the kernel asks for, or raises the user error that says why it cannot have one.
void plan_warp_specialized_schedules(const ir::KernelNode& k, const LayoutInfo& layouts,
                                     PipelinePlan& plan);

} // namespace tp::passes
