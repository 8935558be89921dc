// Lowering of the cp.async multistage pipeline (PlanCpAsync.cpp) for a loop of n iterations
// and S = stages buffers per staged tile. Iteration j's copies land in stage j % S.
//
//   prologue:  for s in 0..S-2: if (s < n) issue(s); commit          (S - 1 groups)
//   loop j:    wait_group(S - 2); barrier
//              if (j + S - 1 < n) issue(j + S - 1); commit           (one group, maybe empty)
//              body, reading stage j % S
//   drain:     wait_group(0); barrier
//
// Why iteration j reads complete data: before its wait, each thread has committed S - 1 + j
// groups, iteration i's copies being group i (0-based; out-of-range iterations commit empty
// groups so the count is the same in every thread and every iteration). wait_group(S - 2)
// leaves at most S - 2 pending, so groups 0..j are complete in this thread; the barrier after
// it makes every thread's completed copies visible to all (on sm_90a the barrier's
// fence.proxy.async also makes them visible to wgmma).
// Why the copies issued in iteration j overwrite nothing still read: they write stage
// (j + S - 1) % S = (j - 1) % S, which iteration j - 1's body read. Every thread reaches
// iteration j's barrier only after finishing that body, and the copies are issued after the
// barrier, so all reads of that stage precede them. (For j = 0 the stage is S - 1, which the
// prologue did not fill and nothing has read since the last drain.) The drain's barrier orders
// the last iterations' reads before anything after the loop, including a later entry's prologue
// when the loop sits inside another loop.
#include "ir/IRVisitor.h"
#include "passes/LowerTileOps.h"

namespace tp::passes {

namespace {

uint64_t uid_of(const Var& v) {
  return ir::as<ir::Variable>(v)->uid;
}

/// The prefetched copies of the iteration whose loop variable is `value`, into stage `stage`.
/// Their offsets, and the body lets they read, are evaluated for that iteration.
ir::Stmt issue(LowerContext& cx, const ir::For* loop, const Expr& value, const Expr& stage) {
  const PipelinePlan& p = cx.plan;
  std::map<uint64_t, Expr> sub = {{uid_of(loop->var), value}};
  for (const ir::Let* l : p.prefetch_lets)
    sub[uid_of(l->var)] = substitute(l->value, sub);
  std::map<uint64_t, Expr> saved = cx.stage;
  for (uint64_t u : p.staged)
    cx.stage[u] = stage;
  std::vector<ir::Stmt> out;
  for (const ir::Copy* c : p.prefetched) {
    ir::Region src = c->src;
    for (Expr& m : src.min)
      m = substitute(m, sub);
    ir::Stmt ahead = ir::Copy::make(src, c->dst, c->loc);
    out.push_back(lower_copy_async(cx, ir::as<ir::Copy>(ahead)));
  }
  cx.stage = saved;
  return seq(out);
}

} // namespace

ir::Stmt lower_cp_async_loop(LowerContext& cx, const ir::For* loop) {
  const PipelinePlan& p = cx.plan;
  const int S = p.stages;
  internal_assert(p.cp_async && S >= 2) << "cp.async lowering without a cp.async plan";
  const ir::Stmt commit = call("tp::sm80::cp_async_commit");
  Expr n = lower_expr(cx, loop->extent), mn = lower_expr(cx, loop->min);
  std::vector<ir::Stmt> out;
  for (int s = 0; s + 1 < S; ++s) {
    out.push_back(if_then(Expr(s) < n, issue(cx, loop, loop->min + s, Expr(s))));
    out.push_back(commit);
  }
  // j: the iteration's index from 0.
  const bool from_zero = mn.as_int() && *mn.as_int() == 0;
  Expr j = from_zero ? Expr(loop->var) : Expr(loop->var) - mn;
  std::vector<ir::Stmt> body = {
      call("tp::sm80::cp_async_wait<" + std::to_string(S - 2) + ">"), cx.barrier(),
      if_then(j + (S - 1) < n, issue(cx, loop, Expr(loop->var) + (S - 1), (j + (S - 1)) % S)),
      commit};
  const auto* lb = ir::as<ir::Seq>(loop->body);
  std::vector<ir::Stmt> rest;
  for (const ir::Stmt& s : lb ? lb->stmts : std::vector<ir::Stmt>{loop->body}) {
    const auto* c = ir::as<ir::Copy>(s);
    if (!(c && std::find(p.prefetched.begin(), p.prefetched.end(), c) != p.prefetched.end()))
      rest.push_back(s);
  }
  std::map<uint64_t, Expr> saved = cx.stage;
  for (uint64_t u : p.staged)
    cx.stage[u] = j % S;
  if (!rest.empty()) body.push_back(lower_stmt(cx, ir::Seq::make(rest, loop->loc)));
  cx.stage = saved;
  out.push_back(
      ir::For::make(loop->var, mn, n, ir::ForKind::serial, {}, seq(std::move(body)), loop->loc));
  out.push_back(call("tp::sm80::cp_async_wait<0>"));
  out.push_back(cx.barrier());
  return seq(std::move(out));
}

} // namespace tp::passes
