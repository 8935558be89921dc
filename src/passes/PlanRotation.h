// Rotation of the shared tiles a warp-specialized loop's element-wise work fills for its gemm
// (packed values unpacked into an operand; any operand that is computed, not copied). One
// buffer makes each iteration wait for its gemm before the next iteration may overwrite the
// tile, so the element-wise work and the tensor cores take turns. With two buffers the work of
// iteration k fills one while the gemm of iteration k - 1 still reads the other: the consumers
// drain that gemm only just before the barrier that publishes the new tile (LowerWarpSpecialized).
// Taken without being asked, because it changes no result: only for a tile each iteration writes
// whole (ir/WriteCoverage.h) before the gemm reads it, that nothing outside the loop touches, and
// when the second buffer fits in shared memory.
#pragma once
#include "ir/IR.h"
#include "passes/InferLayouts.h"
#include "passes/PlanPipeline.h"
#include "passes/Target.h"

namespace tp::passes {

/// On a warp-specialized plan: fills plan.rotated (and plan.rotation_note, for `show`).
void plan_rotation(const ir::KernelNode& k, const LayoutInfo& layouts, const Target& t,
                   PipelinePlan& plan);

} // namespace tp::passes
