// Let flattening (see FlattenLets.h).
#include "passes/FlattenLets.h"

#include "ir/IRVisitor.h"

namespace tp::passes {

namespace {

class Flatten : public ir::IRMutator {
public:
  /// A statement list: `s` with its lets flattened, as one statement (a Seq when several).
  ir::Stmt block(const ir::Stmt& s) {
    if (!s.defined()) return s;
    std::vector<ir::Stmt> out;
    append(s, out);
    if (out.size() == 1 && !ir::as<ir::Let>(out[0])) return out[0];
    return ir::Seq::make(std::move(out), s->loc);
  }

protected:
  using IRMutator::visit;

  void append(const ir::Stmt& s, std::vector<ir::Stmt>& out) {
    if (const auto* q = ir::as<ir::Seq>(s)) {
      for (const ir::Stmt& c : q->stmts)
        append_one(c, out);
      return;
    }
    append_one(s, out);
  }
  void append_one(const ir::Stmt& s, std::vector<ir::Stmt>& out) {
    const auto* l = ir::as<ir::Let>(s);
    if (!l || !l->body.defined()) {
      out.push_back(mutate(s));
      return;
    }
    out.push_back(ir::Let::make(l->var, l->value, ir::Stmt(), l->loc));
    append(l->body, out);
  }

  ir::Stmt visit(const ir::Seq* op, const ir::Stmt&) override {
    std::vector<ir::Stmt> out;
    for (const ir::Stmt& c : op->stmts)
      append_one(c, out);
    return ir::Seq::make(std::move(out), op->loc);
  }
  ir::Stmt visit(const ir::Let* op, const ir::Stmt& self) override {
    return op->body.defined() ? block(self) : self;
  }
  ir::Stmt visit(const ir::For* op, const ir::Stmt&) override {
    return ir::For::make(op->var, op->min, op->extent, op->for_kind, op->schedule, block(op->body),
                         op->loc);
  }
  ir::Stmt visit(const ir::Parallel* op, const ir::Stmt&) override {
    return ir::Parallel::make(op->vars, op->extents, block(op->body), op->loc);
  }
  ir::Stmt visit(const ir::IfThenElse* op, const ir::Stmt&) override {
    return ir::IfThenElse::make(op->cond, block(op->then_case), block(op->else_case), op->loc);
  }
};

} // namespace

ir::Stmt flatten_lets(const ir::Stmt& s) {
  return Flatten().block(s);
}

} // namespace tp::passes
