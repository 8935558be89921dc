// Barrier insertion on tile-level IR. Between two statements where one writes a shared-memory
// buffer (a shared tile, or a fragment kept in shared memory) that the other reads or writes,
// a barrier is inserted; loops get one at the end of the body when the next iteration's
// accesses conflict with this one's. Conservative on purpose: a missing barrier is a silent
// wrong answer. Tiles the warp-specialized producer fills are synchronized by mbarriers
// instead and are left out.
#pragma once
#include "ir/IR.h"
#include "passes/InferLayouts.h"
#include "passes/PlanPipeline.h"

namespace tp::passes {

/// Returns the kernel body with Evaluate(Intrinsic("tp.barrier")) statements inserted.
ir::Stmt insert_barriers(const ir::KernelNode& k, const LayoutInfo& layouts,
                         const PipelinePlan& plan);

/// Is `s` one of the barriers insert_barriers places?
bool is_barrier(const ir::Stmt& s);

} // namespace tp::passes
