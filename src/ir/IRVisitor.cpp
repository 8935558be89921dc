// Default recursion of IRVisitor and IRMutator, generated per node kind.
#include "ir/IRVisitor.h"

namespace tp::ir {

void IRVisitor::visit(const Expr& e) {
  if (!e.defined()) return;
  switch (e->kind) {
#define TILEPILOT_X(n)                                                                             \
  case NodeKind::n:                                                                                \
    return visit(static_cast<const n*>(e.get()));
    TILEPILOT_IR_EXPRS(TILEPILOT_X)
#undef TILEPILOT_X
  default: internal_assert(false) << "statement kind in an expression";
  }
}

void IRVisitor::visit(const Stmt& s) {
  if (!s.defined()) return;
  switch (s->kind) {
#define TILEPILOT_X(n)                                                                             \
  case NodeKind::n:                                                                                \
    return visit(static_cast<const n*>(s.get()));
    TILEPILOT_IR_STMTS(TILEPILOT_X)
#undef TILEPILOT_X
  default: internal_assert(false) << "expression kind in a statement";
  }
}

void IRVisitor::visit(const Region& r) {
  for (const Expr& e : r.min) visit(e);
}

void IRVisitor::visit(const IntImm*) {}
void IRVisitor::visit(const FloatImm*) {}
void IRVisitor::visit(const Variable*) {}
void IRVisitor::visit(const Binary* op) {
  visit(op->a);
  visit(op->b);
}
void IRVisitor::visit(const Call* op) {
  for (const Expr& a : op->args) visit(a);
}
void IRVisitor::visit(const Select* op) {
  visit(op->cond);
  visit(op->a);
  visit(op->b);
}
void IRVisitor::visit(const Cast* op) { visit(op->value); }
void IRVisitor::visit(const Load* op) {
  for (const Expr& i : op->indices) visit(i);
}
void IRVisitor::visit(const Intrinsic* op) {
  for (const Expr& a : op->args) visit(a);
}
void IRVisitor::visit(const Let* op) {
  visit(op->value);
  visit(op->body);
}
void IRVisitor::visit(const Evaluate* op) { visit(op->value); }
void IRVisitor::visit(const Seq* op) {
  for (const Stmt& s : op->stmts) visit(s);
}
void IRVisitor::visit(const For* op) {
  visit(op->min);
  visit(op->extent);
  visit(op->body);
}
void IRVisitor::visit(const Parallel* op) { visit(op->body); }
void IRVisitor::visit(const IfThenElse* op) {
  visit(op->cond);
  visit(op->then_case);
  visit(op->else_case);
}
void IRVisitor::visit(const Store* op) {
  for (const Expr& i : op->indices) visit(i);
  visit(op->value);
}
void IRVisitor::visit(const Allocate*) {}
void IRVisitor::visit(const Copy* op) {
  visit(op->src);
  visit(op->dst);
}
void IRVisitor::visit(const Gemm* op) {
  visit(op->a);
  visit(op->b);
  visit(op->c);
}
void IRVisitor::visit(const Fill* op) {
  visit(op->dst);
  visit(op->value);
}
void IRVisitor::visit(const Reduce*) {}
void IRVisitor::visit(const AtomicAdd* op) {
  for (const Expr& i : op->indices) visit(i);
  visit(op->value);
}
void IRVisitor::visit(const Print* op) { visit(op->value); }

// ---------------------------------------------------------------------------------------------

Expr IRMutator::mutate(const Expr& e) {
  if (!e.defined()) return e;
  switch (e->kind) {
#define TILEPILOT_X(n)                                                                             \
  case NodeKind::n:                                                                                \
    return visit(static_cast<const n*>(e.get()), e);
    TILEPILOT_IR_EXPRS(TILEPILOT_X)
#undef TILEPILOT_X
  default: internal_assert(false) << "statement kind in an expression";
  }
  return e;
}

Stmt IRMutator::mutate(const Stmt& s) {
  if (!s.defined()) return s;
  switch (s->kind) {
#define TILEPILOT_X(n)                                                                             \
  case NodeKind::n:                                                                                \
    return visit(static_cast<const n*>(s.get()), s);
    TILEPILOT_IR_STMTS(TILEPILOT_X)
#undef TILEPILOT_X
  default: internal_assert(false) << "expression kind in a statement";
  }
  return s;
}

std::vector<Expr> IRMutator::mutate(const std::vector<Expr>& es, bool* changed) {
  std::vector<Expr> out;
  out.reserve(es.size());
  for (const Expr& e : es) {
    out.push_back(mutate(e));
    if (out.back().get() != e.get()) *changed = true;
  }
  return out;
}

Region IRMutator::mutate(const Region& r) {
  bool changed = false;
  Region out = r;
  out.min = mutate(r.min, &changed);
  return out;
}

namespace {
bool same_region(const Region& a, const Region& b) {
  if (a.min.size() != b.min.size()) return false;
  for (size_t i = 0; i < a.min.size(); ++i)
    if (a.min[i].get() != b.min[i].get()) return false;
  return true;
}
} // namespace

Expr IRMutator::visit(const IntImm*, const Expr& self) { return self; }
Expr IRMutator::visit(const FloatImm*, const Expr& self) { return self; }
Expr IRMutator::visit(const Variable*, const Expr& self) { return self; }
Expr IRMutator::visit(const Binary* op, const Expr& self) {
  Expr a = mutate(op->a), b = mutate(op->b);
  if (a.get() == op->a.get() && b.get() == op->b.get()) return self;
  return Binary::make(op->op, a, b);
}
Expr IRMutator::visit(const Call* op, const Expr& self) {
  bool changed = false;
  auto args = mutate(op->args, &changed);
  return changed ? Call::make(op->op, args) : self;
}
Expr IRMutator::visit(const Select* op, const Expr& self) {
  Expr c = mutate(op->cond), a = mutate(op->a), b = mutate(op->b);
  if (c.get() == op->cond.get() && a.get() == op->a.get() && b.get() == op->b.get()) return self;
  return Select::make(c, a, b);
}
Expr IRMutator::visit(const Cast* op, const Expr& self) {
  Expr v = mutate(op->value);
  return v.get() == op->value.get() ? self : Cast::make(op->dtype, v);
}
Expr IRMutator::visit(const Load* op, const Expr& self) {
  bool changed = false;
  auto idx = mutate(op->indices, &changed);
  return changed ? Load::make(op->buffer, idx) : self;
}

Expr IRMutator::visit(const Intrinsic* op, const Expr& self) {
  bool changed = false;
  auto args = mutate(op->args, &changed);
  return changed ? Intrinsic::make(op->name, args, op->dtype, op->buffers, op->pure) : self;
}
Stmt IRMutator::visit(const Let* op, const Stmt& self) {
  Expr v = mutate(op->value);
  Stmt b = mutate(op->body);
  if (v.get() == op->value.get() && b.same_as(op->body)) return self;
  return Let::make(op->var, v, b, op->loc);
}
Stmt IRMutator::visit(const Evaluate* op, const Stmt& self) {
  Expr v = mutate(op->value);
  return v.get() == op->value.get() ? self : Evaluate::make(v, op->loc);
}
Stmt IRMutator::visit(const Seq* op, const Stmt& self) {
  std::vector<Stmt> out;
  bool changed = false;
  for (const Stmt& s : op->stmts) {
    Stmt m = mutate(s);
    changed |= !m.same_as(s);
    if (m.defined()) out.push_back(m);
  }
  return changed ? Seq::make(out, op->loc) : self;
}
Stmt IRMutator::visit(const For* op, const Stmt& self) {
  Expr mn = mutate(op->min), ext = mutate(op->extent);
  Stmt body = mutate(op->body);
  if (mn.get() == op->min.get() && ext.get() == op->extent.get() && body.same_as(op->body))
    return self;
  return For::make(op->var, mn, ext, op->for_kind, op->schedule, body, op->loc);
}
Stmt IRMutator::visit(const Parallel* op, const Stmt& self) {
  Stmt body = mutate(op->body);
  return body.same_as(op->body) ? self : Parallel::make(op->vars, op->extents, body, op->loc);
}
Stmt IRMutator::visit(const IfThenElse* op, const Stmt& self) {
  Expr c = mutate(op->cond);
  Stmt t = mutate(op->then_case), e = mutate(op->else_case);
  if (c.get() == op->cond.get() && t.same_as(op->then_case) && e.same_as(op->else_case))
    return self;
  return IfThenElse::make(c, t, e, op->loc);
}
Stmt IRMutator::visit(const Store* op, const Stmt& self) {
  bool changed = false;
  auto idx = mutate(op->indices, &changed);
  Expr v = mutate(op->value);
  if (!changed && v.get() == op->value.get()) return self;
  return Store::make(op->buffer, idx, v, op->loc);
}
Stmt IRMutator::visit(const Allocate*, const Stmt& self) { return self; }
Stmt IRMutator::visit(const Copy* op, const Stmt& self) {
  Region s = mutate(op->src), d = mutate(op->dst);
  if (same_region(s, op->src) && same_region(d, op->dst)) return self;
  return Copy::make(s, d, op->loc);
}
Stmt IRMutator::visit(const Gemm* op, const Stmt& self) {
  Region a = mutate(op->a), b = mutate(op->b), c = mutate(op->c);
  if (same_region(a, op->a) && same_region(b, op->b) && same_region(c, op->c)) return self;
  return Gemm::make(a, b, c, op->trans_a, op->trans_b, op->clear, op->loc);
}
Stmt IRMutator::visit(const Fill* op, const Stmt& self) {
  Region d = mutate(op->dst);
  Expr v = mutate(op->value);
  if (same_region(d, op->dst) && v.get() == op->value.get()) return self;
  return Fill::make(d, v, op->loc);
}
Stmt IRMutator::visit(const Reduce*, const Stmt& self) { return self; }
Stmt IRMutator::visit(const AtomicAdd* op, const Stmt& self) {
  bool changed = false;
  auto idx = mutate(op->indices, &changed);
  Expr v = mutate(op->value);
  if (!changed && v.get() == op->value.get()) return self;
  return AtomicAdd::make(op->buffer, idx, v, op->loc);
}
Stmt IRMutator::visit(const Print* op, const Stmt& self) {
  Expr v = mutate(op->value);
  return v.get() == op->value.get() ? self : Print::make(op->label, v, op->tile, op->loc);
}

void for_each_stmt(const Stmt& s, const std::function<void(const Stmt&)>& f) {
  if (!s.defined()) return;
  f(s);
  if (const auto* q = as<Seq>(s))
    for (const Stmt& c : q->stmts) for_each_stmt(c, f);
  else if (const auto* l = as<For>(s))
    for_each_stmt(l->body, f);
  else if (const auto* p = as<Parallel>(s))
    for_each_stmt(p->body, f);
  else if (const auto* lt = as<Let>(s))
    for_each_stmt(lt->body, f);
  else if (const auto* i = as<IfThenElse>(s)) {
    for_each_stmt(i->then_case, f);
    for_each_stmt(i->else_case, f);
  }
}

} // namespace tp::ir
