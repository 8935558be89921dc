// Shared-memory planning: places every shared buffer (tiles, fragments kept in shared memory,
// one copy per pipeline stage for staged tiles) and the pipeline's mbarriers in the block's
// dynamic shared memory. Tiles are 1024-byte aligned (the 128-byte swizzle repeats every 1024
// bytes and TMA/wgmma address it absolutely). Buffers never share space (a reused tile would
// need a barrier at the end of the dead one's scope). Over the target's limit is a user error that
// lists the buffers.
#pragma once
#include <map>

#include "ir/IR.h"
#include "passes/InferLayouts.h"
#include "passes/PlanPipeline.h"

namespace tp::passes {

struct SmemPlan {
  struct Slot {
    int64_t offset = 0; // bytes from the start of dynamic shared memory
    int stages = 1;
    int64_t stage_elems = 0; // elements of one stage (the layout's size)
    int64_t stage_bytes = 0; // bytes between stages (1024-aligned)
  };
  std::map<uint64_t, Slot> slots;
  int64_t barrier_offset = 0; // mbarriers: full[stages], empty[stages], prologue (= tile_full
                              // when persistent), then tile_empty and the tile-index slot
  int num_barriers = 0;
  /// The TMA stores' two chunk buffers (PipelinePlan::stores), after the tiles; -1 without.
  int64_t store_staging = -1;
  int64_t total_bytes = 0;
  const Slot& slot(const ir::Buffer& b) const;
};

SmemPlan plan_shared_memory(const ir::KernelNode& k, const LayoutInfo& layouts,
                            const PipelinePlan& plan, const Target& t);
/// The same placement without the limit's check (what a plan would need).
SmemPlan place_shared_memory(const ir::KernelNode& k, const LayoutInfo& layouts,
                             const PipelinePlan& plan);

} // namespace tp::passes
