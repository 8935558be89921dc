// Lowering of reduce: a register accumulator's rows are folded per thread, then across the
// four lanes of a quad that share a row (shuffle-xor 1 and 2), then, for mma warps side by
// side along N, across those warps through shared memory; a blocked fragment is folded per
// thread, then across the lanes that share an output element (shuffle-xor), then across warps
// through a shared scratch tile when an output element spans warps (plan_reduce); other operands
// in shared memory are folded by the threads that own each output element.
#include <cmath>

#include "passes/LowerContext.h"
#include "passes/LowerTileOps.h"

namespace tp::passes {

using ir::Buffer;
using ir::Scope;

namespace {

Expr identity(ir::ReduceOp op) {
  switch (op) {
  case ir::ReduceOp::max:
    return ir::FloatImm::make(-INFINITY);
  case ir::ReduceOp::min:
    return ir::FloatImm::make(INFINITY);
  default:
    return Expr(0.0);
  }
}

Expr combine(ir::ReduceOp op, const Expr& a, const Expr& b) {
  switch (op) {
  case ir::ReduceOp::max:
    return max(a, b);
  case ir::ReduceOp::min:
    return min(a, b);
  case ir::ReduceOp::sum:
    return a + b;
  case ir::ReduceOp::absmax:
    return max(abs(a), abs(b));
  }
  return a;
}

/// A blocked fragment along dim 0 or 1: per-thread partials, shuffles, then the cross-warp step;
/// every thread ends with the result of each output element it holds in the result layout.
ir::Stmt lower_blocked_reduce(LowerContext& cx, const ir::Reduce* op) {
  const Buffer &src = op->src, &dst = op->dst;
  const FragmentLayout& ls = cx.layouts.fragment(src);
  ReducePlan rp = plan_reduce(ls, op->dim);
  internal_assert(rp.supported) << "reduce of " << src->name << ": " << rp.why_not;
  const FragmentLayout& res = rp.result;
  int Q = res.regs_per_thread();
  Var r("r"), q("q");
  Buffer tmp = ir::make_buffer(src->name + "_red", Scope::local, DType::f32, {Expr(Q)}, 0, op->loc);
  auto part = [&](const Expr& i) { return ir::Load::make(tmp, {i}); };
  std::vector<ir::Stmt> s;
  s.push_back(ir::Allocate::make(tmp, {}));
  s.push_back(unrolled_for(q, Q, ir::Store::make(tmp, {Expr(q)}, identity(op->op), {})));
  Expr out = op->dim == 1 ? ls.rows_reg(r) : ls.cols_reg(r);
  ir::Stmt fold = ir::Store::make(
      tmp, {out}, combine(op->op, part(out), ir::Load::make(cx.reg(src), ls.reg_index(r))), {});
  if (Expr ok = ls.valid(cx.tid, r); ok.defined()) fold = if_then(ok, fold);
  s.push_back(unrolled_for(r, ls.regs_per_thread(), fold));
  // Every lane takes part in the shuffles (registers past the tile hold the identity).
  for (int mask : rp.shuffle_masks) {
    Expr other = call_expr("tp::warp::shfl_xor", {part(Expr(q)), Expr(mask)}, DType::f32);
    s.push_back(unrolled_for(
        q, Q, ir::Store::make(tmp, {Expr(q)}, combine(op->op, part(Expr(q)), other), {})));
  }
  if (!rp.cross_warp_masks.empty()) {
    const Buffer& xs = cx.layouts.reduce_scratch.at(op);
    auto at = [&](const Expr& t) { return cx.load(xs, {t * Q + q}); };
    s.push_back(unrolled_for(q, Q, cx.store(xs, {cx.tid * Q + q}, part(Expr(q)))));
    s.push_back(cx.thread_barrier());
    // Each thread combines the partials of the threads at every xor distance the masks span.
    Expr acc = at(cx.tid);
    size_t k = rp.cross_warp_masks.size();
    for (size_t sub = 1; sub < (size_t(1) << k); ++sub) {
      int64_t x = 0;
      for (size_t b = 0; b < k; ++b)
        if (sub >> b & 1) x |= rp.cross_warp_masks[b];
      acc = combine(op->op, acc, at(ir::Binary::make(ir::BinOp::bit_xor, cx.tid, Expr(x))));
    }
    s.push_back(unrolled_for(q, Q, ir::Store::make(tmp, {Expr(q)}, acc, {})));
    // The scratch is written again by the next execution of this reduction.
    s.push_back(cx.thread_barrier());
  }
  Expr t = part(Expr(q));
  if (cx.layouts.in_registers(dst)) {
    const FragmentLayout& ld = cx.layouts.fragment(dst);
    internal_assert(ld.same_as(res))
        << "reduce into " << dst->name << ": " << ld.str() << " vs " << res.str();
    Expr prev = ir::Load::make(cx.reg(dst), ld.reg_index(q));
    s.push_back(unrolled_for(q, Q,
                             ir::Store::make(cx.reg(dst), ld.reg_index(q),
                                             op->clear ? t : combine(op->op, prev, t), {})));
  } else {
    std::vector<Expr> i = res.coords(cx.tid, q);
    Expr prev = cx.load(dst, i);
    ir::Stmt st = cx.store(dst, i, op->clear ? t : combine(op->op, prev, t));
    if (Expr w = res.owner(cx.tid); w.defined()) st = if_then(w, st);
    if (Expr ok = res.valid(cx.tid, q); ok.defined()) st = if_then(ok, st);
    s.push_back(unrolled_for(q, Q, st));
  }
  return seq(s);
}

} // namespace

ir::Stmt lower_reduce(LowerContext& cx, const ir::Reduce* op) {
  const Buffer &src = op->src, &dst = op->dst;
  Var r("r"), q("q"), j("rj");
  // Blocked fragments, and accumulators whose rows span warps (mma warps side by side along
  // N), take the general plan; an accumulator whose rows stay in a quad folds in its warp.
  if (cx.layouts.in_registers(src) &&
      (cx.layouts.fragment(src).kind == FragmentLayout::Kind::blocked ||
       (op->dim == 1 && !cx.layouts.fragment(src).rows_within_quad() &&
        cx.layouts.fragment(src).kind != FragmentLayout::Kind::rows)))
    return lower_blocked_reduce(cx, op);
  if (cx.layouts.in_registers(src)) {
    const FragmentLayout& ls = cx.layouts.fragment(src);
    if (dst->scope == Scope::local)
      user_error(op->loc) << "reduce of register fragment '" << src->name << "' into local tile '"
                          << dst->name << "': each thread holds only some rows of the fragment "
                          << "but all of a local tile; reduce into a fragment or a shared tile";
    if (op->dim != 1 || ls.kind == FragmentLayout::Kind::rows)
      user_error(op->loc) << "reduce of register fragment '" << src->name << "' (" << ls.str()
                          << ") along dim " << op->dim
                          << " is not supported: an accumulator reduces along dim 1 (its "
                             "rows); copy it to a shared tile to reduce it another way";
    FragmentLayout rows = ls.rows();
    int Q = rows.regs_per_thread();
    Buffer tmp =
        ir::make_buffer(src->name + "_red", Scope::local, DType::f32, {Expr(Q)}, 0, op->loc);
    std::vector<ir::Stmt> s;
    s.push_back(ir::Allocate::make(tmp, {}));
    s.push_back(unrolled_for(q, Q, ir::Store::make(tmp, {Expr(q)}, identity(op->op), {})));
    Expr rq = ls.rows_reg(r);
    s.push_back(unrolled_for(r, ls.regs_per_thread(),
                             ir::Store::make(tmp, {rq},
                                             combine(op->op, ir::Load::make(tmp, {rq}),
                                                     ir::Load::make(cx.reg(src), ls.reg_index(r))),
                                             {})));
    for (int lane_mask : {1, 2}) {
      Expr t = ir::Load::make(tmp, {Expr(q)});
      Expr other = call_expr("tp::warp::shfl_xor", {t, Expr(lane_mask)}, DType::f32);
      s.push_back(
          unrolled_for(q, Q, ir::Store::make(tmp, {Expr(q)}, combine(op->op, t, other), {})));
    }
    Expr t = ir::Load::make(tmp, {Expr(q)});
    if (cx.layouts.in_registers(dst)) {
      const FragmentLayout& ld = cx.layouts.fragment(dst);
      Expr prev = ir::Load::make(cx.reg(dst), ld.reg_index(q));
      s.push_back(unrolled_for(q, Q,
                               ir::Store::make(cx.reg(dst), ld.reg_index(q),
                                               op->clear ? t : combine(op->op, prev, t), {})));
    } else {
      Expr i = rows.row(cx.tid, q);
      Expr prev = cx.load(dst, {i});
      s.push_back(unrolled_for(
          q, Q,
          if_then(cx.tid % 4 == 0, cx.store(dst, {i}, op->clear ? t : combine(op->op, prev, t)))));
    }
    return seq(s);
  }
  // Source in shared memory: each output element folded by one thread.
  std::vector<int64_t> ss = src->const_shape();
  int64_t n = ss[op->dim];
  auto fold = [&](const std::vector<Expr>& out_idx) {
    Buffer acc = ir::make_buffer("racc", Scope::local, DType::f32, {Expr(1)}, 0, op->loc);
    std::vector<Expr> sidx = out_idx;
    sidx.insert(sidx.begin() + op->dim, Expr(j));
    if (ss.size() == 1) sidx = {Expr(j)};
    Expr a = ir::Load::make(acc, {Expr(0)});
    return std::pair{
        acc,
        seq({ir::Allocate::make(acc, {}), ir::Store::make(acc, {Expr(0)}, identity(op->op), {}),
             serial_for(
                 j, Expr(0), Expr(n),
                 ir::Store::make(acc, {Expr(0)}, combine(op->op, a, cx.load(src, sidx)), {}))})};
  };
  if (cx.layouts.in_registers(dst)) {
    const FragmentLayout& ld = cx.layouts.fragment(dst);
    if (ld.kind != FragmentLayout::Kind::rows)
      user_error(op->loc) << "reduce into register fragment '" << dst->name << "' (" << ld.str()
                          << ") from a shared tile is not supported";
    auto [acc, body] = fold({ld.row(cx.tid, q)});
    Expr res = ir::Load::make(acc, {Expr(0)});
    Expr prev = ir::Load::make(cx.reg(dst), ld.reg_index(q));
    return unrolled_for(
        q, ld.regs_per_thread(),
        seq({body, ir::Store::make(cx.reg(dst), ld.reg_index(q),
                                   op->clear ? res : combine(op->op, prev, res), {})}));
  }
  std::vector<int64_t> ds = dst->const_shape();
  int64_t total = 1;
  for (int64_t e : ds)
    total *= e;
  // Into a local tile: every thread folds every output element (each holds the whole tile).
  return element_for(cx, total, dst->scope == Scope::local, [&](Expr e) {
    std::vector<Expr> idx(ds.size());
    int64_t stride = 1;
    for (int d = static_cast<int>(ds.size()) - 1; d >= 0; --d) {
      idx[d] = (e / stride) % ds[d];
      stride *= ds[d];
    }
    std::vector<Expr> out_idx = ss.size() == 1 ? std::vector<Expr>{} : idx;
    auto [acc, body] = fold(out_idx);
    Expr res = ir::Load::make(acc, {Expr(0)});
    Expr prev = cx.load(dst, idx);
    return seq({body, cx.store(dst, idx, op->clear ? res : combine(op->op, prev, res))});
  });
}

} // namespace tp::passes
