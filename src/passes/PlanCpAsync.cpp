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
#include <map>
#include <set>

#include "ir/IRVisitor.h"
#include "passes/BufferAccesses.h"
#include "passes/PlanPipeline.h"

namespace tp::passes {

namespace {

using ir::Scope;

/// Variables an expression reads, and the buffers it loads from.
struct Reads : ir::IRVisitor {
  using ir::IRVisitor::visit;
  std::set<uint64_t> vars;
  std::vector<ir::Buffer> buffers;
  void visit(const ir::Variable* v) override { vars.insert(v->uid); }
  void visit(const ir::Load* l) override {
    buffers.push_back(l->buffer);
    ir::IRVisitor::visit(l);
  }
};

std::string copy_name(const ir::Copy* c) {
  return "the copy from '" + c->src.buffer->name + "' into '" + c->dst.buffer->name + "'";
}

/// Why copy c (statement `at` of the loop's body) cannot be issued ahead, or "" when it can;
/// adds the body lets its offsets need to `lets`.
std::string prefetch_blocker(const ir::For* loop, const std::vector<ir::Stmt>& body, size_t at,
                             const std::set<uint64_t>& kernel_writes,
                             std::set<const ir::Let*>& lets) {
  const auto* c = ir::as<ir::Copy>(body[at]);
  const uint64_t tile = c->dst.buffer->uid;
  for (size_t i = 0; i < at; ++i)
    if (buffer_accesses(body[i]).touches(tile))
      return copy_name(c) + " is not the first access of '" + c->dst.buffer->name +
             "' in the loop's body (an earlier statement would see the next iteration's data)";
  if (kernel_writes.count(c->src.buffer->uid))
    return copy_name(c) + " reads a tensor the kernel writes (a read issued iterations early "
                          "could miss those writes)";
  // Lets of the body before the copy, by variable.
  std::map<uint64_t, const ir::Let*> body_lets;
  for (size_t i = 0; i < at; ++i)
    if (const auto* l = ir::as<ir::Let>(body[i]); l && !l->body.defined())
      body_lets[ir::as<ir::Variable>(l->var)->uid] = l;
  // Every variable defined inside the body (lets at any depth, inner loop variables) that the
  // offsets could read: only the body's top-level lets can be evaluated again.
  std::set<uint64_t> inner;
  ir::for_each_stmt(loop->body, [&](const ir::Stmt& s) {
    if (const auto* l = ir::as<ir::Let>(s)) inner.insert(ir::as<ir::Variable>(l->var)->uid);
    if (const auto* f = ir::as<ir::For>(s)) inner.insert(ir::as<ir::Variable>(f->var)->uid);
  });
  // Tiles are fixed during the loop unless its body writes them (a value written before the
  // loop is ordered before the prologue by the barrier InsertBarriers puts before the loop).
  std::set<uint64_t> loop_writes = buffer_accesses(loop->body).writes;
  std::vector<Expr> todo(c->src.min.begin(), c->src.min.end());
  std::set<uint64_t> seen;
  while (!todo.empty()) {
    Reads r;
    r.visit(todo.back());
    todo.pop_back();
    for (const ir::Buffer& b : r.buffers) {
      bool global = b->scope == Scope::global;
      if (global ? kernel_writes.count(b->uid) : loop_writes.count(b->uid))
        return copy_name(c) + ": its offsets read " + ir::scope_name(b->scope) + " '" + b->name +
               "', which the " + (global ? "kernel" : "loop") +
               " writes, so its value for a later iteration is not known yet";
    }
    for (uint64_t v : r.vars) {
      if (!inner.count(v) || !seen.insert(v).second) continue;
      auto it = body_lets.find(v);
      if (it == body_lets.end())
        return copy_name(c) + ": its offsets read a variable defined inside the loop's body "
                              "other than by a let before the copy";
      lets.insert(it->second);
      todo.push_back(it->second->value);
    }
  }
  return "";
}

} // namespace

void plan_cp_async(const ir::KernelNode& k, PipelinePlan& plan) {
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
    std::string why = prefetch_blocker(loop, body, at, kernel_writes, lets);
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
