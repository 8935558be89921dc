// Barrier insertion: a forward scan per statement list tracking the shared buffers read and
// written since the last barrier.
#include "passes/InsertBarriers.h"

#include <set>

#include "ir/IRVisitor.h"
#include "passes/BufferAccesses.h"

namespace tp::passes {

namespace {

struct Accesses {
  std::set<uint64_t> reads, writes;
  bool conflicts_with(const Accesses& before) const {
    for (uint64_t w : writes)
      if (before.reads.count(w) || before.writes.count(w)) return true;
    for (uint64_t r : reads)
      if (before.writes.count(r)) return true;
    return false;
  }
  void add(const Accesses& o) {
    reads.insert(o.reads.begin(), o.reads.end());
    writes.insert(o.writes.begin(), o.writes.end());
  }
  void clear() {
    reads.clear();
    writes.clear();
  }
  void drop(const std::set<uint64_t>& uids) {
    for (uint64_t uid : uids) {
      reads.erase(uid);
      writes.erase(uid);
    }
  }
};

ir::Stmt barrier() {
  return ir::Evaluate::make(ir::Intrinsic::make("tp.barrier", {}, DType::i32, {}, false));
}

class Inserter : public ir::IRMutator {
public:
  Inserter(const LayoutInfo& l, std::set<uint64_t> skip, const PipelinePlan& plan)
      : l_(l), skip_(std::move(skip)), plan_(plan) {}

  /// The statement's accesses of the shared buffers barriers order (not the skipped ones).
  Accesses accesses(const ir::Stmt& s) {
    BufferAccesses all = buffer_accesses(s);
    Accesses a;
    for (const auto& [from, to] : {std::pair{&all.reads, &a.reads}, {&all.writes, &a.writes}})
      for (uint64_t uid : *from)
        if (l_.in_shared(all.buffers.at(uid)) && !skip_.count(uid)) to->insert(uid);
    return a;
  }

  /// Inserts barriers into a statement list; `pending` holds the accesses since the last
  /// barrier on entry and on exit.
  std::vector<ir::Stmt> scan(const std::vector<ir::Stmt>& stmts, Accesses& pending) {
    std::vector<ir::Stmt> out;
    for (const ir::Stmt& s : stmts) {
      Accesses a = accesses(s);
      if (a.conflicts_with(pending)) {
        out.push_back(barrier());
        pending.clear();
      }
      out.push_back(mutate(s));
      pending.add(a);
    }
    return out;
  }

protected:
  using IRMutator::visit;

  ir::Stmt visit(const ir::Seq* op, const ir::Stmt&) override {
    Accesses pending;
    return ir::Seq::make(scan(op->stmts, pending), op->loc);
  }

  ir::Stmt visit(const ir::For* op, const ir::Stmt&) override {
    const auto* b = ir::as<ir::Seq>(op->body);
    std::vector<ir::Stmt> stmts = b ? b->stmts : std::vector<ir::Stmt>{op->body};
    Accesses pending;
    std::vector<ir::Stmt> out = scan(stmts, pending);
    // The next iteration starts with this one's pending accesses: up to the body's first
    // barrier, a conflicting statement needs one at the end of the body. A rotated tile's next
    // iteration writes its other buffer (PlanRotation.h), so it conflicts with nothing here.
    if (op == plan_.loop) pending.drop(plan_.rotated);
    for (const ir::Stmt& s : std::vector<ir::Stmt>(out)) {
      if (is_barrier(s)) break;
      if (accesses(s).conflicts_with(pending)) {
        out.push_back(barrier());
        break;
      }
    }
    return ir::For::make(op->var, op->min, op->extent, op->for_kind, op->schedule,
                         ir::Seq::make(out, op->loc), op->loc);
  }

  ir::Stmt visit(const ir::IfThenElse* op, const ir::Stmt&) override {
    return ir::IfThenElse::make(op->cond, mutate(op->then_case), mutate(op->else_case), op->loc);
  }

  // Element-wise loops are independent iterations: no barriers inside them.
  ir::Stmt visit(const ir::Parallel*, const ir::Stmt& self) override { return self; }

private:
  const LayoutInfo& l_;
  std::set<uint64_t> skip_;
  const PipelinePlan& plan_;
};

} // namespace

bool is_barrier(const ir::Stmt& s) {
  const auto* e = ir::as<ir::Evaluate>(s);
  const auto* i = e ? ir::as<ir::Intrinsic>(e->value) : nullptr;
  return i && i->name == "tp.barrier";
}

ir::Stmt insert_barriers(const ir::KernelNode& k, const LayoutInfo& layouts,
                         const PipelinePlan& plan) {
  std::set<uint64_t> skip;
  for (const TmaLoad& l : plan.loads)
    skip.insert(l.copy->dst.buffer->uid);
  // cp.async stages are ordered by the pipeline's own wait and barrier at the top of every
  // iteration (LowerCpAsync.cpp), which a barrier around the prefetched copies would only repeat.
  if (plan.cp_async) skip.insert(plan.staged.begin(), plan.staged.end());
  Inserter ins(layouts, skip, plan);
  ir::Stmt body = k.body;
  if (!ir::as<ir::Seq>(body)) body = ir::Seq::make({body});
  return ins.mutate(body);
}

} // namespace tp::passes
