// Decides how a kernel's pipelined loop runs on sm_90a: warp-specialized, with a producer
// warpgroup that issues TMA loads into `stages` shared-memory buffers guarded by full/empty
// mbarriers, and the kernel's own threads as consumers. Copies from global to shared before the
// loop that feed it (a tile every iteration reads) are issued by the producer too. When the kernel
// does not fit (no TMA-able copies, several pipelined loops, the target has no TMA) the plan
// says why, and a loop with stages >= 2 is planned as a cp.async multistage pipeline instead
// (PlanCpAsync.cpp): its leading global->shared copies are issued stages - 1 iterations ahead
// into per-stage buffers. When neither fits, the loop runs serially, single-buffered.
// The kernel states its schedule (ir::LoopSchedule on the loop; "persistent" and "cluster"
// annotations on the kernel). The verifier checks what the loop's structure must satisfy
// (ir/ScheduleRules.h); the plan checks the rest on the target. On a target with TMA, a request
// the plan cannot honour is a user error that names why; without TMA it is not applied, and
// the plan says so (`not_applied`), because the same kernel must run on every target. The
// schedules that ride on the warp-specialized plan are planned in PlanSchedules.cpp.
#pragma once
#include <set>
#include <string>
#include <vector>

#include "ir/IR.h"
#include "passes/InferLayouts.h"
#include "passes/PlanTmaStores.h"
#include "passes/Target.h"

namespace tp::passes {

/// One TMA load: a global->shared copy, split into boxes of at most one swizzle row wide.
struct TmaLoad {
  const ir::Copy* copy = nullptr;
  int param = -1;           // kernel parameter index of the global tensor
  std::vector<int64_t> box; // box extents, innermost (contiguous) dimension first
  int swizzle_bytes = 0;    // 0 (none), 32, 64, 128
  int64_t boxes = 1;        // boxes per copy (column chunks of the shared tile)
  int64_t bytes = 0;        // bytes the whole copy lands
  bool in_loop = false;     // staged inside the pipelined loop, or before it
  /// In a 2-CTA cluster: the tile is the same in both CTAs, so each loads half of its boxes and
  /// multicasts them to both.
  bool multicast = false;
  /// Multicast with an odd number of boxes: each CTA loads one half of every box's rows (the
  /// box's outer extent is then half the tile's).
  bool multicast_rows = false;
};

struct PipelinePlan {
  bool warp_specialized = false;
  std::string reason; // why not warp-specialized, when not
  /// cp.async multistage (when not warp-specialized): `prefetched` are the loop's copies issued
  /// stages - 1 iterations ahead, each into stage (iteration % stages) of its staged tile.
  bool cp_async = false;
  std::string cp_async_reason; // why not cp.async, when neither plan was taken
  std::vector<const ir::Copy*> prefetched;
  /// Lets of the loop's body the prefetched copies' offsets read (directly or through other
  /// lets), in program order: they are evaluated again for the prefetched iteration.
  std::vector<const ir::Let*> prefetch_lets;
  /// The pipelined loop that neither plan took keeps its requested depth here (for `show`).
  int requested_stages = 1;
  const ir::For* loop = nullptr;
  int stages = 1;
  std::vector<TmaLoad> loads; // loop loads, then prologue loads
  std::set<uint64_t> staged;  // shared buffers with one copy per stage
  /// Shared tiles the loop's element-wise work fills for its gemm, given two buffers used in
  /// turn (PlanRotation.h); rotation_note says why a candidate kept one, for `show`.
  std::set<uint64_t> rotated;
  std::string rotation_note;
  /// Flattened lets (FlattenLets.h) the producer evaluates too, because the loads' offsets or
  /// the loop's bounds read them: top-level ones before the loop, and ones in the loop's body.
  std::vector<ir::Stmt> producer_lets, producer_loop_lets;
  /// What the kernel asked for that only the warp-specialized plan implements, on a target
  /// without TMA, where the next plan down runs instead (for `show`); empty otherwise.
  std::string not_applied;
  /// CTAs per thread-block cluster along grid y (the kernel's "cluster" annotation, honoured
  /// when some loop load can be multicast): the pair of blocks (bx, 2c) and (bx, 2c+1).
  int cluster = 1;
  /// Persistent (the kernel's "persistent" annotation): a grid of about one block per SM whose
  /// producer takes tiles from a launch-wide counter and hands each tile's index to the
  /// consumers, so one tile's epilogue overlaps the next tile's loads (LowerWarpSpecialized.cpp).
  /// With cluster=2 the grid is of pairs of blocks, and each pair walks pairs of tiles (bx, 2c)
  /// and (bx, 2c+1) in a fixed order instead of taking tickets: both blocks must get the same.
  bool persistent = false;
  /// Ping-pong (the loop's schedule asks for it): consumer warpgroups take turns at the
  /// tensor cores. Each runs its loop's second gemm and the next iteration's first as one turn,
  /// so one warpgroup's element-wise work between the gemms overlaps another's gemms. Needs a
  /// loop with exactly two gemms, no consumer barrier inside the loop, and at least two
  /// consumer warpgroups; a loop that does not meet that is a user error.
  bool pingpong = false;
  /// The loop's schedule asks for defer_last_gemm: its second (last) gemm is deferred by one
  /// iteration, so it runs on the tensor cores while the next iteration's element-wise work
  /// runs. Needs exactly two wgmma gemms, first and last in the loop's work, at least two
  /// stages, no consumer barrier in the loop, and no ping-pong; else a user error.
  bool defer_second_gemm = false;
  /// Accumulator copies stored through shared memory by TMA (PlanTmaStores.h, planned after
  /// the rest); the parameters that would be on a launch allowing it (what CudaKernel checks to
  /// pick a variant); why a copy was not, for `show`.
  std::vector<TmaStore> stores;
  uint64_t tma_store_candidates = 0;
  std::string store_note;
  int producer_threads() const { return warp_specialized ? 128 : 0; }
  const TmaLoad* load_for(const ir::Copy* c) const;
  const TmaStore* store_for(const ir::Copy* c) const;
  /// Bytes of the stores' two chunk buffers (0 without stores).
  int64_t store_staging_bytes() const;
};

PipelinePlan plan_pipeline(const ir::KernelNode& k, const LayoutInfo& layouts, const Target& t);

/// Plans the cp.async multistage pipeline for a plan that is not warp-specialized
/// (PlanCpAsync.cpp): sets cp_async, loop, stages, staged, prefetched and prefetch_lets, or
/// cp_async_reason naming what prevents it.
void plan_cp_async(const ir::KernelNode& k, PipelinePlan& plan);

/// "tma-warp-specialized", "cp.async multistage" or "serial".
std::string plan_kind(const PipelinePlan& p);

} // namespace tp::passes
