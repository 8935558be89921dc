// Visitor and mutator over the IR. Both recurse into every child by default: override the
// node kinds you care about and call the base to keep recursing.
#pragma once
#include <functional>

#include "ir/IR.h"

namespace tp::ir {

class IRVisitor {
public:
  virtual ~IRVisitor() = default;
  void visit(const Expr& e);
  void visit(const Stmt& s);
  virtual void visit(const Region& r);

protected:
#define TILEPILOT_X(n) virtual void visit(const n* op);
  TILEPILOT_IR_EXPRS(TILEPILOT_X) TILEPILOT_IR_STMTS(TILEPILOT_X)
#undef TILEPILOT_X
};

/// Rebuilds the nodes whose children changed; unchanged subtrees are shared.
class IRMutator {
public:
  virtual ~IRMutator() = default;
  virtual Expr mutate(const Expr& e);
  virtual Stmt mutate(const Stmt& s);
  Region mutate(const Region& r);

protected:
#define TILEPILOT_X(n) virtual Expr visit(const n* op, const Expr& self);
  TILEPILOT_IR_EXPRS(TILEPILOT_X)
#undef TILEPILOT_X
#define TILEPILOT_X(n) virtual Stmt visit(const n* op, const Stmt& self);
  TILEPILOT_IR_STMTS(TILEPILOT_X)
#undef TILEPILOT_X
  std::vector<Expr> mutate(const std::vector<Expr>& es, bool* changed);
};

/// Calls `f` on every node, parents before children.
void for_each_stmt(const Stmt& s, const std::function<void(const Stmt&)>& f);

} // namespace tp::ir
