// Which consumer-filled gemm operand tiles of a warp-specialized loop get two buffers.
#include "passes/PlanRotation.h"

#include <algorithm>

#include "ir/IRVisitor.h"
#include "ir/WriteCoverage.h"
#include "passes/BufferAccesses.h"
#include "passes/InsertBarriers.h"

namespace tp::passes {

namespace {

int64_t align(int64_t x, int64_t a) {
  return (x + a - 1) / a * a;
}

/// Shared memory the plan needs with the tiles `rotated` in two buffers, as PlanSharedMemory
/// lays it out (each tile 1024-aligned, per stage), plus the pipeline's barriers.
int64_t smem_estimate(const ir::KernelNode& k, const LayoutInfo& layouts, const PipelinePlan& p,
                      const std::vector<uint64_t>& rotated) {
  int64_t bytes = 0;
  ir::for_each_stmt(k.body, [&](const ir::Stmt& s) {
    const auto* a = ir::as<ir::Allocate>(s);
    if (!a || !layouts.in_shared(a->buffer)) return;
    const ir::Buffer& b = a->buffer;
    int64_t one = align(layouts.shared_layout(b).size_elems() * dtype_bytes(b->dtype), 1024);
    const bool two = std::find(rotated.begin(), rotated.end(), b->uid) != rotated.end();
    bytes += one * (p.staged.count(b->uid) ? p.stages : two ? 2 : 1);
  });
  return bytes + 8 * (2 * p.stages + 3) + 1024; // barriers, and room for reduction scratch
}

} // namespace

void plan_rotation(const ir::KernelNode& k, const LayoutInfo& layouts, const Target& t,
                   PipelinePlan& plan) {
  // The schedules that already reorder the loop's gemms, and clusters (whose peer CTA reads
  // nothing of these tiles but shares the stage barriers), keep one buffer.
  if (!plan.warp_specialized || plan.defer_second_gemm || plan.pingpong || plan.cluster > 1 ||
      plan.stages < 2)
    return;
  const auto* lb = ir::as<ir::Seq>(plan.loop->body);
  std::vector<ir::Stmt> stmts = lb ? lb->stmts : std::vector<ir::Stmt>{plan.loop->body};
  // The work before the loop's last gemm (without its copies, lets and barriers) is the
  // element-wise work that fills the tile; the gemm must come last and be the only one.
  std::vector<ir::Stmt> fill;
  const ir::Gemm* gemm = nullptr;
  for (const ir::Stmt& s : stmts) {
    const auto* c = ir::as<ir::Copy>(s);
    if ((c && plan.load_for(c)) || is_barrier(s) || ir::as<ir::Let>(s)) continue;
    if (gemm) return; // work after the gemm
    if ((gemm = ir::as<ir::Gemm>(s))) continue;
    bool nested = false;
    ir::for_each_stmt(s, [&](const ir::Stmt& x) { nested |= ir::as<ir::Gemm>(x) != nullptr; });
    if (nested) return;
    fill.push_back(s);
  }
  if (!gemm || fill.empty() || !layouts.gemms.count(gemm) ||
      layouts.gemms.at(gemm) != GemmKind::wgmma_ss)
    return;
  // What the fill reads and writes; it must not touch the accumulator, read the tile it fills,
  // or write any other shared tile (whose next-iteration write a barrier still orders).
  BufferAccesses acc;
  for (const ir::Stmt& s : fill) {
    BufferAccesses a = buffer_accesses(s);
    acc.reads.insert(a.reads.begin(), a.reads.end());
    acc.writes.insert(a.writes.begin(), a.writes.end());
    acc.buffers.insert(a.buffers.begin(), a.buffers.end());
  }
  // From here on the loop has a candidate: a shared operand its work writes. When it keeps one
  // buffer, `show` says why (the kernel author can often meet the condition).
  auto keep_one = [&](const ir::Buffer& x, const std::string& why) {
    if (plan.rotation_note.empty())
      plan.rotation_note = "'" + x->name + "' keeps one buffer: " + why;
  };
  const auto* body = ir::as<ir::Seq>(k.body);
  std::vector<uint64_t> chosen;
  for (const ir::Buffer& x : {gemm->a.buffer, gemm->b.buffer}) {
    if (!layouts.in_shared(x) || plan.staged.count(x->uid) || !acc.writes.count(x->uid)) continue;
    if (acc.touches(gemm->c.buffer->uid)) {
      keep_one(x, "the work that fills it also uses the gemm's accumulator");
      continue;
    }
    if (acc.reads.count(x->uid)) {
      keep_one(x, "the work that fills it also reads it");
      continue;
    }
    if (!ir::writes_every_element(fill, x)) {
      keep_one(x, "the loop's work is not proven to write all of it every iteration (a fill, a "
                  "whole copy, or unconditional stores over every index; docs/schedules.md)");
      continue;
    }
    // Allocated at the kernel's top level, and used by the loop alone.
    bool top = false, outside = false;
    for (const ir::Stmt& s : body->stmts) {
      if (const auto* a = ir::as<ir::Allocate>(s); a && a->buffer->uid == x->uid) top = true;
      if (s.get() != static_cast<const ir::StmtNode*>(plan.loop) &&
          buffer_accesses(s).touches(x->uid))
        outside = true;
    }
    if (top && !outside)
      chosen.push_back(x->uid);
    else
      keep_one(x, outside ? "it is used outside the loop too" : "it is allocated inside the loop");
  }
  for (const auto& [uid, b] : acc.buffers)
    if (acc.writes.count(uid) && layouts.in_shared(b) &&
        std::find(chosen.begin(), chosen.end(), uid) == chosen.end()) {
      if (!chosen.empty())
        plan.rotation_note = "not rotated: the loop's work also writes shared '" + b->name + "'";
      return;
    }
  if (chosen.empty()) return;
  const int64_t limit = t.smem_limit(k.smem_limit, k.blocks_per_sm);
  if (smem_estimate(k, layouts, plan, chosen) > limit) {
    plan.rotation_note = "not rotated: a second buffer would not fit in shared memory";
    return;
  }
  plan.rotated.insert(chosen.begin(), chosen.end());
}

} // namespace tp::passes
