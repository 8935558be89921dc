// The buffer read/write classifier (see BufferAccesses.h).
#include "passes/BufferAccesses.h"

#include "ir/IRVisitor.h"

namespace tp::passes {

namespace {

class Collect : public ir::IRVisitor {
public:
  BufferAccesses acc;
  using IRVisitor::visit;

protected:
  void read(const ir::Buffer& b) {
    acc.reads.insert(b->uid);
    acc.buffers.emplace(b->uid, b);
  }
  void write(const ir::Buffer& b) {
    acc.writes.insert(b->uid);
    acc.buffers.emplace(b->uid, b);
  }
  void visit(const ir::Load* op) override {
    read(op->buffer);
    IRVisitor::visit(op);
  }
  void visit(const ir::Store* op) override {
    write(op->buffer);
    IRVisitor::visit(op);
  }
  void visit(const ir::AtomicAdd* op) override {
    write(op->buffer);
    IRVisitor::visit(op);
  }
  void visit(const ir::Copy* op) override {
    read(op->src.buffer);
    write(op->dst.buffer);
    IRVisitor::visit(op);
  }
  void visit(const ir::Gemm* op) override {
    read(op->a.buffer);
    read(op->b.buffer);
    read(op->c.buffer);
    write(op->c.buffer);
    IRVisitor::visit(op);
  }
  void visit(const ir::Fill* op) override {
    write(op->dst.buffer);
    IRVisitor::visit(op);
  }
  void visit(const ir::Reduce* op) override {
    read(op->src);
    read(op->dst);
    write(op->dst);
  }
  void visit(const ir::Print* op) override {
    if (op->tile) read(op->tile);
    IRVisitor::visit(op);
  }
};

} // namespace

BufferAccesses buffer_accesses(const ir::Stmt& s) {
  Collect c;
  c.visit(s);
  return c.acc;
}

} // namespace tp::passes
