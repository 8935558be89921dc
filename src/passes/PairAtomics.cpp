#include "passes/PairAtomics.h"

namespace tp::passes {

namespace {

/// One element atomic with every let inlined: what it adds, where, and under which guards.
struct ElementAtomic {
  ir::Buffer buffer;
  Expr flat, value;
  std::vector<Expr> guards;
};

/// Peels lets and guards (ifs without an else) down to one tp.atomic_add; false when the body
/// does anything else. Let values are substituted into everything below them, so that the
/// element can be instantiated for two registers without their lets colliding.
bool match(const ir::Stmt& s, std::map<uint64_t, Expr>& lets, ElementAtomic& out) {
  if (const auto* l = ir::as<ir::Let>(s)) {
    lets[ir::as<ir::Variable>(l->var)->uid] = substitute(l->value, lets);
    return match(l->body, lets, out);
  }
  if (const auto* i = ir::as<ir::IfThenElse>(s)) {
    if (i->else_case.defined()) return false;
    out.guards.push_back(substitute(i->cond, lets));
    return match(i->then_case, lets, out);
  }
  const auto* e = ir::as<ir::Evaluate>(s);
  const auto* call = e ? ir::as<ir::Intrinsic>(e->value) : nullptr;
  if (!call || call->name != "tp.atomic_add" || call->buffers.size() != 1) return false;
  out.buffer = call->buffers[0];
  out.flat = substitute(call->args[0], lets);
  out.value = substitute(call->args[1], lets);
  return true;
}

Expr all_of(const std::vector<Expr>& guards) {
  Expr c;
  for (const Expr& g : guards)
    c = c.defined() ? (c && g) : g;
  return c;
}

/// The element atomic for register `reg`, under its guards.
ir::Stmt element(const ElementAtomic& a, const std::map<uint64_t, Expr>& at) {
  ir::Stmt s = call("tp.atomic_add", {substitute(a.flat, at), substitute(a.value, at)}, {a.buffer});
  Expr g = all_of(a.guards);
  return g.defined() ? if_then(substitute(g, at), s) : s;
}

} // namespace

ir::Stmt pair_atomics(const LowerContext& cx, const ir::Buffer& anchor, const Var& r, int64_t regs,
                      const ir::Stmt& body) {
  // Vector reductions (red.global.add.v2.f32) are sm_90's; accumulator layouts are the ones
  // whose even and odd registers are adjacent columns (the paired store's premise).
  const FragmentLayout& l = cx.layouts.fragment(anchor);
  if (!cx.target.sm90() || regs % 2 != 0) return {};
  if (l.kind != FragmentLayout::Kind::wgmma_acc && l.kind != FragmentLayout::Kind::mma_acc)
    return {};
  std::map<uint64_t, Expr> lets;
  ElementAtomic a;
  if (!match(body, lets, a)) return {};
  if (a.buffer->scope != ir::Scope::global || a.buffer->dtype != DType::f32) return {};
  Var q("q");
  const uint64_t rid = ir::as<ir::Variable>(r)->uid;
  std::map<uint64_t, Expr> at0{{rid, q * 2}}, at1{{rid, q * 2 + 1}};
  Expr f0 = substitute(a.flat, at0), f1 = substitute(a.flat, at1);
  // Adjacent elements, both in bounds: one paired atomic (it checks the address's alignment
  // itself, as a view's base may be odd). Otherwise each element on its own, so the pairing
  // never changes which elements are added.
  Expr both = f1 == f0 + 1;
  if (Expr g = all_of(a.guards); g.defined())
    both = substitute(g, at0) && substitute(g, at1) && both;
  ir::Stmt paired = call("tp::cg::atomic_add2",
                         {call_expr("tp.ptr", {f0}, DType::i32, {a.buffer}),
                          substitute(a.value, at0), substitute(a.value, at1)});
  ir::Stmt apart = seq({element(a, at0), element(a, at1)});
  return unrolled_for(q, regs / 2, if_then(both, paired, apart));
}

} // namespace tp::passes
