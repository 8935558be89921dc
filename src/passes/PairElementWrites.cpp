#include "passes/PairElementWrites.h"

#include "ir/IRVisitor.h"

namespace tp::passes {

namespace {

/// One element write with every let inlined: what it writes, where, how, and under which
/// guards.
struct ElementWrite {
  bool atomic = false;
  ir::Buffer buffer;
  Expr flat, value;
  std::vector<Expr> guards;
};

/// Peels lets and guards (ifs without an else) down to one global store or tp.atomic_add.
/// Returns why the body is not of that form ("" when it is). Let values are substituted into
/// everything below them, so that the element can be instantiated for two registers without
/// their lets colliding.
std::string match(const ir::Stmt& s, std::map<uint64_t, Expr>& lets, ElementWrite& out) {
  if (const auto* l = ir::as<ir::Let>(s)) {
    lets[ir::as<ir::Variable>(l->var)->uid] = substitute(l->value, lets);
    return match(l->body, lets, out);
  }
  if (const auto* i = ir::as<ir::IfThenElse>(s)) {
    if (i->else_case.defined()) return "the write is under an if with an else";
    out.guards.push_back(substitute(i->cond, lets));
    return match(i->then_case, lets, out);
  }
  if (const auto* st = ir::as<ir::Store>(s)) {
    if (st->buffer->scope != ir::Scope::global || st->indices.size() != 1)
      return "the loop writes '" + st->buffer->name + "', which is not a global tensor";
    out.buffer = st->buffer;
    out.flat = substitute(st->indices[0], lets);
    out.value = substitute(st->value, lets);
    // A cast to the destination's type is the store's own conversion (the paired store rounds
    // the same way), so an f32 value cast to bf16 still pairs.
    if (const auto* c = ir::as<ir::Cast>(out.value); c && c->dtype == st->buffer->dtype)
      out.value = c->value;
    return "";
  }
  const auto* e = ir::as<ir::Evaluate>(s);
  const auto* call = e ? ir::as<ir::Intrinsic>(e->value) : nullptr;
  if (!call || call->name != "tp.atomic_add" || call->buffers.size() != 1)
    return "the loop body does more than one element write";
  out.atomic = true;
  out.buffer = call->buffers[0];
  out.flat = substitute(call->args[0], lets);
  out.value = substitute(call->args[1], lets);
  return "";
}

/// Why the write has no paired form ("" when it has one). The paired helpers take two floats
/// and convert them to the destination's type: bf16, f16 and f32 stores (store2_aligned), f32
/// atomics (atomic_add2_aligned, whose vector reduction is sm_90's).
std::string no_paired_form(const LowerContext& cx, const ElementWrite& w) {
  const std::string what = (w.atomic ? "atomic_add into '" : "store into '") + w.buffer->name;
  if (w.value.dtype() != DType::f32)
    return what + "': the value is " + dtype_name(w.value.dtype()) + ", not f32";
  // Reading the tensor the loop writes (in the value or a guard) would let the pair's second
  // element see the first's old value where element order showed it the new one (a shifted
  // read of the same row).
  struct ReadsOf : ir::IRVisitor {
    uint64_t uid = 0;
    bool found = false;
    using ir::IRVisitor::visit;
    void visit(const ir::Load* l) override {
      found = found || l->buffer->uid == uid;
      ir::IRVisitor::visit(l);
    }
  } reads;
  reads.uid = w.buffer->uid;
  reads.visit(w.value);
  for (const Expr& g : w.guards)
    reads.visit(g);
  if (reads.found) return what + "': the value or a guard reads the tensor it writes";
  DType t = w.buffer->dtype;
  if (w.atomic && t != DType::f32) return what + "': only f32 has a paired reduction";
  if (w.atomic && !cx.target.sm90())
    return what + "': " + cx.target.arch + " has no vector reductions";
  if (!w.atomic && t != DType::bf16 && t != DType::f16 && t != DType::f32)
    return what + "': a " + dtype_name(t) + " tensor has no paired store";
  return "";
}

/// Whether `body` writes global memory (a store or an atomic). Only global writes pair: the
/// paired reduction (red.global.add.v2.f32) has no shared form, and a shared tile's element
/// writes are not the epilogue traffic the pairing is for.
bool writes_global(const ir::Stmt& body) {
  bool any = false;
  ir::for_each_stmt(body, [&](const ir::Stmt& s) {
    if (const auto* st = ir::as<ir::Store>(s)) any = any || st->buffer->scope == ir::Scope::global;
    if (const auto* e = ir::as<ir::Evaluate>(s))
      if (const auto* c = ir::as<ir::Intrinsic>(e->value))
        any = any || (c->name == "tp.atomic_add" && c->buffers.size() == 1 &&
                      c->buffers[0]->scope == ir::Scope::global);
  });
  return any;
}

Expr all_of(const std::vector<Expr>& guards) {
  Expr c;
  for (const Expr& g : guards)
    c = c.defined() ? (c && g) : g;
  return c;
}

/// The element write for the register that `at` names, under its guards.
ir::Stmt element(const ElementWrite& w, const std::map<uint64_t, Expr>& at) {
  Expr flat = substitute(w.flat, at), v = substitute(w.value, at);
  ir::Stmt s = w.atomic ? call("tp.atomic_add", {flat, v}, {w.buffer})
                        : ir::Store::make(w.buffer, {flat}, v, {});
  Expr g = all_of(w.guards);
  return g.defined() ? if_then(substitute(g, at), s) : s;
}

} // namespace

ir::Stmt pair_element_writes(LowerContext& cx, const ir::Buffer& anchor, const Var& r,
                             const ir::Stmt& body, const SourceLoc& loc) {
  const FragmentLayout& l = cx.layouts.fragment(anchor);
  if (!l.adjacent_column_pairs()) return {};
  if (!writes_global(body)) return {};
  const std::string where =
      "parallel loop over '" + anchor->name + "'" + (loc.known() ? " at " + loc.str() : "");
  std::map<uint64_t, Expr> lets;
  ElementWrite w;
  std::string why = match(body, lets, w);
  if (why.empty()) why = no_paired_form(cx, w);
  // Stores pair only on request. Measured on the H100 (2026-12-05), pairing took a grouped GEMM
  // lesson from 306 to 411 TFLOP/s, but cost an operator whose tiles are mostly empty rows 2 %
  // at run time and 15-42 % of its cold compile (the per-pair branches). Atomics always pair:
  // a paired reduction halves the epilogue's atomic traffic.
  auto asked = cx.k.attrs.find("paired_stores");
  if (why.empty() && !w.atomic && (asked == cx.k.attrs.end() || asked->second != "1"))
    why = "store into '" + w.buffer->name +
          "': stores pair when the kernel asks, annotate(\"paired_stores\", \"1\")";
  if (!why.empty()) {
    cx.write_notes.push_back(where + ": element writes, not paired: " + why);
    return {};
  }
  cx.write_notes.push_back(where + ": " + (w.atomic ? "atomic_add" : "store") + " into '" +
                           w.buffer->name + "' paired (two adjacent columns a write)");
  Var q("q");
  const uint64_t rid = ir::as<ir::Variable>(r)->uid;
  std::map<uint64_t, Expr> at0{{rid, q * 2}}, at1{{rid, q * 2 + 1}};
  Expr f0 = substitute(w.flat, at0), f1 = substitute(w.flat, at1);
  Expr p0 = call_expr("tp.ptr", {f0}, DType::i32, {w.buffer});
  // Adjacent elements, both in bounds, the first aligned to the pair's size (a view's base may
  // be odd): one paired write. Otherwise each element on its own, so the pairing never changes
  // which elements are written. The three writes have their own tests and no else, so that each
  // can be a predicated instruction. A pair with neither element in bounds (the empty rows of a
  // partial tile, whole blocks of a grid sized for the worst case) costs its two guards, as
  // unpaired.
  const int64_t pair_bytes = 2 * dtype_bytes(w.buffer->dtype);
  Expr both = f1 == f0 + 1, any;
  if (Expr g = all_of(w.guards); g.defined()) {
    Expr g0 = substitute(g, at0), g1 = substitute(g, at1);
    both = g0 && g1 && both;
    any = g0 || g1;
  }
  both = both && call_expr("tp::cg::aligned_to", {p0, Expr(pair_bytes)}, DType::boolean);
  Var ok("paired");
  ir::Stmt paired = call(w.atomic ? "tp::cg::atomic_add2_aligned" : "tp::cg::store2_aligned",
                         {p0, substitute(w.value, at0), substitute(w.value, at1)});
  ir::Stmt writes = ir::Let::make(
      ok, both,
      seq({if_then(ok, paired), if_then(!ok, element(w, at0)), if_then(!ok, element(w, at1))}));
  return unrolled_for(q, l.regs_per_thread() / 2, any.defined() ? if_then(any, writes) : writes);
}

} // namespace tp::passes
