// Sinking fragment loads into accumulator loops (see SinkFragmentLoads.h).
#include "passes/SinkFragmentLoads.h"

#include <map>
#include <set>

#include "ir/CopyShape.h"
#include "ir/IRVisitor.h"

namespace tp::passes {

namespace {

using ir::Buffer;
using ir::Scope;

/// Every Load of a buffer, by uid, and every buffer a statement list touches.
class Loads : public ir::IRVisitor {
public:
  using IRVisitor::visit;
  std::map<uint64_t, int> count;
  std::set<uint64_t> touched;

protected:
  void visit(const ir::Load* op) override {
    ++count[op->buffer->uid];
    touched.insert(op->buffer->uid);
    IRVisitor::visit(op);
  }
  void visit(const ir::Store* op) override {
    touched.insert(op->buffer->uid);
    IRVisitor::visit(op);
  }
};

struct Candidate {
  const ir::Copy* copy = nullptr;
  int copies = 0;
  bool rejected = false;
  int anchored_reads = 0; // Loads inside accumulator loops after the copy in its list
};

class Finder {
public:
  Finder(const ir::KernelNode& k, const LayoutInfo& l) : k_(k), l_(l) {}

  std::set<uint64_t> sinkable() {
    std::set<uint64_t> written;
    ir::for_each_stmt(k_.body, [&](const ir::Stmt& s) { classify(s, written); });
    Loads all;
    all.visit(k_.body);
    ir::for_each_stmt(k_.body, [&](const ir::Stmt& s) {
      if (const auto* q = ir::as<ir::Seq>(s)) count_reads(q);
    });
    std::set<uint64_t> out;
    for (const auto& [uid, c] : cand_) {
      if (c.rejected || c.copies != 1 || written.count(c.copy->src.buffer->uid)) continue;
      int reads = all.count.count(uid) ? all.count.at(uid) : 0;
      if (reads > 0 && reads == c.anchored_reads) out.insert(uid);
    }
    return out;
  }

  const ir::Copy* copy_of(uint64_t uid) const { return cand_.at(uid).copy; }

private:
  void reject(const Buffer& b) {
    if (b->scope == Scope::fragment) cand_[b->uid].rejected = true;
  }

  void classify(const ir::Stmt& s, std::set<uint64_t>& written) {
    auto write = [&](const Buffer& b) {
      if (b->scope == Scope::global) written.insert(b->uid);
    };
    if (const auto* c = ir::as<ir::Copy>(s)) {
      write(c->dst.buffer);
      reject(c->src.buffer);
      const Buffer& f = c->dst.buffer;
      if (f->scope != Scope::fragment) return;
      Candidate& cd = cand_[f->uid];
      ++cd.copies;
      cd.copy = c;
      if (c->src.buffer->scope != Scope::global || !ir::is_whole(c->dst)) cd.rejected = true;
    } else if (const auto* st = ir::as<ir::Store>(s)) {
      write(st->buffer);
      reject(st->buffer);
    } else if (const auto* g = ir::as<ir::Gemm>(s)) {
      reject(g->a.buffer), reject(g->b.buffer), reject(g->c.buffer);
    } else if (const auto* r = ir::as<ir::Reduce>(s)) {
      reject(r->src), reject(r->dst);
    } else if (const auto* f = ir::as<ir::Fill>(s)) {
      write(f->dst.buffer);
      reject(f->dst.buffer);
    } else if (const auto* a = ir::as<ir::AtomicAdd>(s)) {
      write(a->buffer);
      reject(a->buffer);
    } else if (const auto* p = ir::as<ir::Print>(s)) {
      if (p->tile) reject(p->tile);
    }
  }

  bool accumulator(uint64_t uid) const {
    auto it = l_.fragments.find(uid);
    return it != l_.fragments.end() && (it->second.kind == FragmentLayout::Kind::wgmma_acc ||
                                        it->second.kind == FragmentLayout::Kind::mma_acc);
  }

  static size_t rank_of(const Buffer& b) {
    size_t n = 0;
    for (int64_t e : b->const_shape())
      n += e != 1;
    return n;
  }

  /// Reads of a candidate inside accumulator loops that follow its copy in this list.
  void count_reads(const ir::Seq* q) {
    std::set<uint64_t> copied; // candidates whose copy came earlier in this list
    for (const ir::Stmt& s : q->stmts) {
      if (const auto* c = ir::as<ir::Copy>(s)) {
        auto it = cand_.find(c->dst.buffer->uid);
        if (it != cand_.end() && it->second.copy == c) copied.insert(it->first);
        continue;
      }
      const auto* p = ir::as<ir::Parallel>(s);
      if (!p) continue;
      Loads in;
      in.visit(p->body);
      bool anchored = false;
      for (uint64_t b : in.touched)
        anchored |= accumulator(b);
      if (!anchored) continue;
      // Only fragments with the loop's rank: a vector (a bias b(j) in a 2-d loop) read from
      // global memory at every use had ptxas hoist its loads ahead of the loop's math and
      // spill (lesson 08: 32 bytes), where its shared-memory copy does not.
      for (uint64_t uid : copied)
        if (in.count.count(uid) && rank_of(cand_[uid].copy->dst.buffer) == p->vars.size())
          cand_[uid].anchored_reads += in.count.at(uid);
    }
  }

  const ir::KernelNode& k_;
  const LayoutInfo& l_;
  std::map<uint64_t, Candidate> cand_;
};

class Sink : public ir::IRMutator {
public:
  explicit Sink(std::map<uint64_t, const ir::Copy*> sunk) : sunk_(std::move(sunk)) {}

protected:
  using IRMutator::visit;

  ir::Stmt visit(const ir::Seq* op, const ir::Stmt&) override {
    std::vector<ir::Stmt> out;
    for (const ir::Stmt& s : op->stmts) {
      if (const auto* a = ir::as<ir::Allocate>(s); a && sunk_.count(a->buffer->uid)) continue;
      if (const auto* c = ir::as<ir::Copy>(s); c && sunk_.count(c->dst.buffer->uid)) continue;
      out.push_back(mutate(s));
    }
    return ir::Seq::make(std::move(out), op->loc);
  }

  /// F(idx) is the copy's global element at the same row-major position of the non-unit
  /// extents (the copy rule, ir/CopyShape.h) past the region's min; 0 out of bounds.
  Expr visit(const ir::Load* op, const Expr& self) override {
    auto it = sunk_.find(op->buffer->uid);
    if (it == sunk_.end()) return IRMutator::visit(op, self);
    const ir::Region& src = it->second->src;
    const Buffer& f = op->buffer;
    std::vector<int64_t> fs = f->const_shape();
    std::vector<Expr> fidx;
    std::vector<int64_t> fsq;
    for (size_t d = 0; d < fs.size(); ++d)
      if (fs[d] != 1) fidx.push_back(mutate(op->indices[d])), fsq.push_back(fs[d]);
    fidx = ir::regroup(fidx, fsq, src.squeezed()); // the copy rule's pairing
    std::vector<Expr> gidx;
    Expr inside;
    size_t next = 0;
    for (size_t d = 0; d < src.extent.size(); ++d) {
      Expr e = src.min[d];
      if (src.extent[d] != 1) e = e + fidx.at(next++);
      gidx.push_back(e);
      Expr in_d = e >= Expr(0) && e < src.buffer->shape[d];
      inside = inside.defined() ? (inside && in_d) : in_d;
    }
    Expr v = ir::Load::make(src.buffer, gidx);
    if (src.buffer->dtype != f->dtype) v = ir::Cast::make(f->dtype, v);
    Expr zero = is_float(f->dtype) ? ir::FloatImm::make(0.0, f->dtype) : Expr(0);
    return ir::Select::make(inside, v, zero);
  }

private:
  std::map<uint64_t, const ir::Copy*> sunk_;
};

} // namespace

ir::Stmt sink_fragment_loads(const ir::KernelNode& k, const LayoutInfo& l) {
  Finder f(k, l);
  std::map<uint64_t, const ir::Copy*> sunk;
  for (uint64_t uid : f.sinkable())
    sunk[uid] = f.copy_of(uid);
  if (sunk.empty()) return k.body;
  return Sink(std::move(sunk)).mutate(k.body);
}

} // namespace tp::passes
