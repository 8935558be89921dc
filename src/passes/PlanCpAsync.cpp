// cp.async multistage planning (Ampere style), for a pipelined loop the TMA warp-specialized
// plan did not take. The loop's leading global->shared copies (top-level statements of its body
// that come before any other access of their tile) are issued stages - 1 iterations ahead, each
// into its own stage of the destination tile; LowerCpAsync.cpp emits the prologue, the waits and
// the barrier. A copy can be issued ahead only when everything it reads is known for that later
// iteration: its offsets may read the loop variable, values fixed before the loop, and lets of
// the body that read nothing but those, global tensors the kernel never writes and tiles the
// loop never writes.
#include <algorithm>
#include <functional>
#include <set>

#include "ir/IRVisitor.h"
#include "passes/BufferAccesses.h"
#include "passes/IssueAhead.h"
#include "passes/PlanPipeline.h"

namespace tp::passes {

void plan_cp_async(const ir::KernelNode& k, PipelinePlan& plan) {
  using ir::Scope;
  plan.cp_async = false;
  plan.loop = nullptr;
  plan.stages = 1;
  plan.staged.clear();
  plan.prefetched.clear();
  plan.prefetch_lets.clear();
  std::vector<const ir::For*> loops;
  ir::for_each_stmt(k.body, [&](const ir::Stmt& s) {
    if (const auto* f = ir::as<ir::For>(s); f && f->for_kind == ir::ForKind::pipelined)
      loops.push_back(f);
  });
  if (loops.empty()) {
    plan.cp_async_reason = "no pipelined loop";
    return;
  }
  plan.requested_stages = loops[0]->schedule.stages;
  if (loops.size() > 1) {
    plan.cp_async_reason = "more than one pipelined loop (each runs serially)";
    return;
  }
  const ir::For* loop = loops[0];
  if (loop->schedule.stages < 2) {
    plan.cp_async_reason = "the loop asks for 1 stage";
    return;
  }
  const auto* seq = ir::as<ir::Seq>(loop->body);
  std::vector<ir::Stmt> body = seq ? seq->stmts : std::vector<ir::Stmt>{loop->body};
  std::set<uint64_t> kernel_writes = buffer_accesses(k.body).writes;
  std::vector<size_t> copies;
  for (size_t i = 0; i < body.size(); ++i)
    if (const auto* c = ir::as<ir::Copy>(body[i]);
        c && c->src.buffer->scope == Scope::global && c->dst.buffer->scope == Scope::shared)
      copies.push_back(i);
  if (copies.empty()) {
    plan.cp_async_reason = "the pipelined loop has no global-to-shared copies at its top level";
    return;
  }
  std::set<const ir::Let*> lets;
  std::set<uint64_t> staged;
  for (size_t at : copies) {
    std::string why = issue_ahead_blocker(loop, body, at, kernel_writes, lets);
    if (!why.empty()) {
      plan.cp_async_reason = why;
      return;
    }
    staged.insert(ir::as<ir::Copy>(body[at])->dst.buffer->uid);
  }
  // A staged tile holds one iteration's data per stage: only the prefetched copies may write
  // it, and nothing outside the loop's body may touch it (which stage would it mean?).
  for (uint64_t uid : staged) {
    const ir::Copy* first = nullptr;
    for (size_t at : copies)
      if (const auto* c = ir::as<ir::Copy>(body[at]); c->dst.buffer->uid == uid) first = c;
    bool other_write = false;
    for (size_t i = 0; i < body.size(); ++i) {
      bool prefetched = std::find(copies.begin(), copies.end(), i) != copies.end();
      if (!prefetched && buffer_accesses(body[i]).writes.count(uid)) other_write = true;
    }
    if (other_write) {
      plan.cp_async_reason = "shared tile '" + first->dst.buffer->name +
                             "' is also written in the loop by something other than " +
                             copy_name(first);
      return;
    }
    bool outside = false;
    std::function<void(const ir::Stmt&)> walk = [&](const ir::Stmt& s) {
      if (s.get() == static_cast<const ir::StmtNode*>(loop)) return;
      if (const auto* q = ir::as<ir::Seq>(s)) {
        for (const ir::Stmt& x : q->stmts)
          walk(x);
        return;
      }
      if (const auto* f = ir::as<ir::For>(s)) return walk(f->body);
      if (const auto* i = ir::as<ir::IfThenElse>(s)) {
        walk(i->then_case);
        if (i->else_case.defined()) walk(i->else_case);
        return;
      }
      if (const auto* l = ir::as<ir::Let>(s); l && l->body.defined()) return walk(l->body);
      if (!ir::as<ir::Allocate>(s) && buffer_accesses(s).touches(uid)) outside = true;
    };
    walk(k.body);
    if (outside) {
      plan.cp_async_reason = "shared tile '" + first->dst.buffer->name +
                             "' is used outside the pipelined loop (with one buffer per stage, "
                             "which one it means there is not defined)";
      return;
    }
  }
  plan.cp_async = true;
  plan.cp_async_reason.clear();
  plan.loop = loop;
  plan.stages = loop->schedule.stages;
  plan.staged = staged;
  for (size_t at : copies)
    plan.prefetched.push_back(ir::as<ir::Copy>(body[at]));
  for (const ir::Stmt& s : body)
    if (const auto* l = ir::as<ir::Let>(s); l && lets.count(l)) plan.prefetch_lets.push_back(l);
}

} // namespace tp::passes
