// The schedules a kernel states that ride on the warp-specialized pipeline plan: what it asks
// for, and the planners that honour each request or say why the kernel cannot have it.
#include "passes/PlanSchedules.h"

#include <algorithm>

#include "ir/IRVisitor.h"
#include "ir/ScheduleRules.h"
#include "passes/BufferAccesses.h"
#include "passes/InsertBarriers.h"

namespace tp::passes {

namespace {

/// A 2-CTA cluster along grid y (the "cluster" annotation): blocks (bx, 2c) and (bx, 2c+1) run
/// together, and a loop load whose source tile does not depend on the y block index is the same
/// in both, so each CTA loads half of its boxes and multicasts them. Only loads whose source
/// indices read nothing but the other block indices, the loop variable and the kernel's Dims
/// qualify (anything else might differ between the two CTAs). An even number of boxes splits
/// by boxes; otherwise a 2-d tile splits each box's rows in halves (a multiple of 8 rows each,
/// so the halves start on a swizzle-pattern boundary). Without such a load the cluster would
/// only cost, so asking for it is a user error.
void plan_cluster(const ir::KernelNode& k, PipelinePlan& plan) {
  auto it = k.attrs.find("cluster");
  if (it == k.attrs.end() || it->second == "1") return;
  if (k.block_vars.size() < 2)
    user_error(k.loc) << "kernel '" << k.name
                      << "': cluster=2 pairs blocks along grid y, and the kernel has a 1-d grid";
  std::set<uint64_t> allowed = {ir::as<ir::Variable>(plan.loop->var)->uid};
  for (size_t i = 0; i < k.block_vars.size(); ++i)
    if (i != 1) allowed.insert(ir::as<ir::Variable>(k.block_vars[i])->uid);
  for (const Var& d : k.dims)
    allowed.insert(ir::as<ir::Variable>(d)->uid);
  // A multicast stage is refilled only when both blocks have freed it, so the two must run the
  // loop the same number of times: its bounds may not read the y block index (or anything
  // else that could differ between them). A pair that parted would wait forever.
  VarUses bounds;
  bounds.visit(plan.loop->min);
  bounds.visit(plan.loop->extent);
  for (uint64_t id : bounds.uids)
    if (!allowed.count(id) || id == ir::as<ir::Variable>(plan.loop->var)->uid)
      user_error(plan.loop->loc)
          << "kernel '" << k.name
          << "': cluster=2 needs the pipelined loop to run the same number of times in both "
             "blocks of a pair, but its bounds read something other than the x/z block "
             "indices, the kernel's sizes and constants (such as the y block index); drop the "
             "cluster annotation or make the bounds the same for both";
  int shared = 0;
  for (TmaLoad& l : plan.loads) {
    bool by_rows = l.boxes % 2 != 0;
    if (!l.in_loop || (by_rows && (l.box.size() != 2 || l.box[1] % 16 != 0))) continue;
    VarUses u;
    for (const Expr& e : l.copy->src.min)
      u.visit(e);
    bool same =
        std::all_of(u.uids.begin(), u.uids.end(), [&](uint64_t id) { return allowed.count(id); });
    if (!same) continue;
    l.multicast = true;
    ++shared;
    if (by_rows) {
      l.multicast_rows = true;
      l.box[1] /= 2;
    }
  }
  if (shared == 0)
    user_error(k.loc) << "kernel '" << k.name
                      << "': cluster=2 needs a pipelined load that is the same for both blocks "
                         "of a pair (its coordinates do not read the y block index) and splits "
                         "in two; this kernel has none, so the cluster would only cost";
  plan.cluster = 2;
}

/// The "persistent" annotation is honoured for warp-specialized kernels. With a cluster, the
/// pair of blocks takes its tiles together: the tiles are then pairs of tiles, dealt to the
/// clusters in a fixed order (LowerWarpSpecialized.cpp) so that both blocks agree on each one.
void plan_persistent(const ir::KernelNode& k, PipelinePlan& plan) {
  auto it = k.attrs.find("persistent");
  if (it == k.attrs.end() || it->second == "0") return;
  plan.persistent = true;
}

/// The consumer barriers in a pipelined loop's body: the schedules that reorder its gemms
/// (ping-pong, deferred last gemm) let warpgroups run apart, which a block-wide barrier forbids.
int loop_barriers(const ir::For* loop) {
  int barriers = 0;
  ir::for_each_stmt(loop->body, [&](const ir::Stmt& s) { barriers += is_barrier(s); });
  return barriers;
}

/// The message for a loop schedule the loop cannot run on this target: a shared tile written
/// and read in one iteration needs a block-wide barrier, which the schedule cannot have.
[[noreturn]] void barrier_in_loop(const ir::For* loop, const char* what) {
  user_error(loop->loc) << "pipelined: " << what
                        << " lets consumer warpgroups run apart, but this loop needs a "
                           "block-wide barrier (a shared tile is written and read in one "
                           "iteration); keep that tile in a fragment or drop "
                        << what;
}

void plan_pingpong(PipelinePlan& plan) {
  if (!plan.loop->schedule.pingpong) return;
  if (loop_barriers(plan.loop) > 0) barrier_in_loop(plan.loop, "pingpong");
  plan.pingpong = true;
}

void plan_overlap(const LayoutInfo& layouts, PipelinePlan& plan) {
  if (!plan.loop->schedule.defer_last_gemm) return;
  // The verifier saw that the loop's work starts and ends with a gemm; deferring one needs
  // both to be wgmma (the asynchronous tensor-core issue) on this target.
  if (loop_barriers(plan.loop) > 0) barrier_in_loop(plan.loop, "defer_last_gemm");
  std::vector<ir::Stmt> work = ir::loop_work(plan.loop);
  for (const ir::Stmt& s : {work.front(), work.back()}) {
    const auto* g = ir::as<ir::Gemm>(s);
    if (!g)
      user_error(plan.loop->loc) << "pipelined: defer_last_gemm needs the loop's work to start "
                                    "and end with a gemm (a let or a statement moved there)";
    auto kind = layouts.gemms.count(g) ? layouts.gemms.at(g) : GemmKind::mma;
    if (kind != GemmKind::wgmma_ss && kind != GemmKind::wgmma_rs)
      user_error(g->loc) << "pipelined: defer_last_gemm needs both gemms of the loop to run as "
                            "wgmma; this one is planned as mma (its tile is too small for a "
                            "warpgroup: at least 64 rows per consumer warpgroup)";
  }
  plan.defer_second_gemm = true;
}

} // namespace

void plan_warp_specialized_schedules(const ir::KernelNode& k, const LayoutInfo& layouts,
                                     PipelinePlan& plan) {
  plan_cluster(k, plan); // first: persistence walks a cluster's tiles in pairs
  plan_persistent(k, plan);
  plan_pingpong(plan);
  plan_overlap(layouts, plan);
}

std::string ScheduleRequests::what_text() const {
  std::string out;
  for (const std::string& s : what)
    out += (out.empty() ? "" : ", ") + s;
  return out;
}

ScheduleRequests schedule_requests(const ir::KernelNode& k) {
  ScheduleRequests r;
  r.loc = k.loc;
  ir::for_each_stmt(k.body, [&](const ir::Stmt& s) {
    const auto* f = ir::as<ir::For>(s);
    if (!f || f->for_kind != ir::ForKind::pipelined) return;
    const ir::LoopSchedule& sc = f->schedule;
    size_t before = r.what.size();
    if (sc.copies == ir::CopyEngine::tma) r.what.push_back("copies = tma");
    if (sc.pingpong) r.what.push_back("pingpong");
    if (sc.defer_last_gemm) r.what.push_back("defer_last_gemm");
    if (r.what.size() > before) r.loc = f->loc;
    if (sc.copies == ir::CopyEngine::cp_async && !r.cp_async_required) {
      r.cp_async_required = true;
      r.cp_async_loc = f->loc;
    }
  });
  if (auto it = k.attrs.find("persistent"); it != k.attrs.end() && it->second == "1")
    r.what.push_back("persistent=1");
  if (auto it = k.attrs.find("cluster"); it != k.attrs.end() && it->second == "2")
    r.what.push_back("cluster=2");
  return r;
}

} // namespace tp::passes
