// The rule for issuing a loop's copies ahead (see IssueAhead.h).
#include "passes/IssueAhead.h"

#include <map>

#include "ir/IRVisitor.h"
#include "passes/BufferAccesses.h"

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

} // namespace

std::string copy_name(const ir::Copy* c) {
  return "the copy from '" + c->src.buffer->name + "' into '" + c->dst.buffer->name + "'";
}

std::string issue_ahead_blocker(const ir::For* loop, const std::vector<ir::Stmt>& body, size_t at,
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
  std::vector<Expr> pending(c->src.min.begin(), c->src.min.end()); // expressions to read
  std::set<uint64_t> seen;
  while (!pending.empty()) {
    Reads r;
    r.visit(pending.back());
    pending.pop_back();
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
      pending.push_back(it->second->value);
    }
  }
  return "";
}

} // namespace tp::passes
