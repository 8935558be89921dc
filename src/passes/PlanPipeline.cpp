// Pipeline planning: find the pipelined loop and the copies a TMA producer can take over.
#include "passes/PlanPipeline.h"

#include <algorithm>
#include <map>
#include <optional>

#include "ir/IRPrinter.h"
#include "ir/IRVisitor.h"
#include "ir/KnownDivisor.h"
#include "passes/BufferAccesses.h"
#include "passes/PlanRotation.h"
#include "passes/PlanSchedules.h"

namespace tp::passes {

const TmaLoad* PipelinePlan::load_for(const ir::Copy* c) const {
  for (const TmaLoad& l : loads)
    if (l.copy == c) return &l;
  return nullptr;
}

const TmaStore* PipelinePlan::store_for(const ir::Copy* c) const {
  for (const TmaStore& s : stores)
    if (s.copy == c) return &s;
  return nullptr;
}

int64_t PipelinePlan::store_staging_bytes() const {
  int64_t b = 0;
  for (const TmaStore& s : stores)
    b = std::max(b, 2 * s.chunk_bytes());
  return b;
}

namespace {

using ir::Scope;

/// The value of every variable the kernel binds by a let, by the variable's uid.
std::map<uint64_t, Expr> let_values(const ir::KernelNode& k) {
  std::map<uint64_t, Expr> lets;
  ir::for_each_stmt(k.body, [&](const ir::Stmt& s) {
    if (const auto* l = ir::as<ir::Let>(s)) lets[ir::as<ir::Variable>(l->var)->uid] = l->value;
  });
  return lets;
}

/// `e` with its let-bound variables replaced by their values, through lets of lets: what is
/// known of an offset's factors is in the values (`let k0 = k * 32`).
Expr with_let_values(const std::map<uint64_t, Expr>& lets, const Expr& e) {
  struct Values : ir::IRMutator {
    const std::map<uint64_t, Expr>& lets;
    explicit Values(const std::map<uint64_t, Expr>& l) : lets(l) {}
    using ir::IRMutator::visit;
    Expr visit(const ir::Variable* op, const Expr& self) override {
      auto it = lets.find(op->uid);
      return it == lets.end() ? self : mutate(it->second);
    }
  } v(lets);
  return v.mutate(e);
}

/// A TMA load for `c`, or an empty optional with the reason in `why`.
/// `lets`: the kernel's let_values.
std::optional<TmaLoad> tma_load(const ir::KernelNode& k, const ir::Copy* c,
                                const LayoutInfo& layouts, const std::map<uint64_t, Expr>& lets,
                                std::string* why) {
  const ir::Region &src = c->src, &dst = c->dst;
  if (src.buffer->scope != Scope::global || dst.buffer->scope != Scope::shared) {
    *why = "not a global-to-shared copy";
    return std::nullopt;
  }
  if (src.buffer->dtype != dst.buffer->dtype) {
    *why = "the copy converts dtype";
    return std::nullopt;
  }
  std::vector<int64_t> ds = dst.buffer->const_shape();
  if (ds.size() != 2 || dst.extent != ds) {
    *why = "the shared tile is not a whole 2-d tile";
    return std::nullopt;
  }
  int rank = src.buffer->rank();
  if (rank > 5 || src.extent.back() != ds[1]) {
    *why = "the tile's columns are not the tensor's contiguous dimension";
    return std::nullopt;
  }
  // The tile's rows are the box's outer dimensions flattened row-major (the copy rule), which is
  // also how TMA lands a box of any rank in shared memory: innermost dimension fastest. Each
  // outer extent is one dimension of the TMA box.
  int64_t rows = 1, widest = 1;
  for (int d = 0; d < rank - 1; ++d)
    rows *= src.extent[d], widest = std::max(widest, src.extent[d]);
  if (rows != ds[0]) {
    *why = "the box's outer extents do not multiply to the tile's rows";
    return std::nullopt;
  }
  const SharedLayout& sl = layouts.shared_layout(dst.buffer);
  int eb = dtype_bytes(dst.buffer->dtype);
  TmaLoad l;
  l.copy = c;
  for (size_t i = 0; i < k.params.size(); ++i)
    if (k.params[i]->uid == src.buffer->uid) l.param = static_cast<int>(i);
  if (sl.kind == SharedLayout::Kind::swizzled && !sl.hardware_swizzle()) {
    *why = "the tile's swizzle (" + sl.str() + ") is not one TMA writes";
    return std::nullopt;
  }
  l.swizzle_bytes = sl.kind == SharedLayout::Kind::swizzled ? sl.swizzle_bytes : 0;
  // The box's first column must be provably 16-byte aligned. A box starting 26 bytes before a
  // row (column offset -13, bf16, 128-byte swizzle) stopped an H100 with an illegal instruction
  // at its TMA load (random program 4828, 2026-12-07); every aligned box of the operators and of
  // the random programs, negative row offsets included, ran.
  if (!ir::known_multiple_of(with_let_values(lets, src.min.back()),
                             std::max<int64_t>(1, 16 / eb))) {
    *why = "the tile's first column (" + ir::to_string(src.min.back()) +
           ") is not provably a multiple of 16 bytes, where a TMA box starts";
    return std::nullopt;
  }
  int64_t inner = l.swizzle_bytes ? l.swizzle_bytes / eb : ds[1];
  if (inner * eb % 16 != 0 || inner > 256 || widest > 256) {
    *why = "the tile is not a valid TMA box (each extent <= 256, row bytes a multiple of 16)";
    return std::nullopt;
  }
  l.boxes = ds[1] / inner;
  for (int d = rank - 1; d >= 0; --d)
    l.box.push_back(d == rank - 1 ? inner : src.extent[d]);
  l.bytes = ds[0] * ds[1] * eb;
  return l;
}

/// Picks the lets the producer must evaluate (PipelinePlan::producer_lets): those the loads'
/// offsets and the loop's bounds read, directly or through other lets. False, with the reason,
/// when one of them reads memory the producer cannot: a tile (the consumers' data) or a tensor
/// the kernel writes.
bool plan_producer_lets(const ir::KernelNode& k, const std::vector<ir::Stmt>& top, size_t loop_at,
                        const std::vector<ir::Stmt>& loop_stmts, PipelinePlan& plan,
                        std::string* why) {
  std::set<uint64_t> written;
  ir::for_each_stmt(k.body, [&](const ir::Stmt& s) {
    if (const auto* st = ir::as<ir::Store>(s)) written.insert(st->buffer->uid);
    if (const auto* c = ir::as<ir::Copy>(s)) written.insert(c->dst.buffer->uid);
    if (const auto* a = ir::as<ir::AtomicAdd>(s)) written.insert(a->buffer->uid);
    if (const auto* f = ir::as<ir::Fill>(s)) written.insert(f->dst.buffer->uid);
  });
  struct Reads : ir::IRVisitor {
    using ir::IRVisitor::visit;
    std::vector<ir::Buffer> buffers;
    void visit(const ir::Load* l) override {
      buffers.push_back(l->buffer);
      ir::IRVisitor::visit(l);
    }
  };
  VarUses need;
  for (const TmaLoad& l : plan.loads)
    for (const Expr& e : l.copy->src.min)
      need.visit(e);
  need.visit(plan.loop->min);
  need.visit(plan.loop->extent);
  auto pick = [&](const std::vector<ir::Stmt>& stmts, size_t end, std::vector<ir::Stmt>& out) {
    for (size_t i = end; i-- > 0;) {
      const auto* l = ir::as<ir::Let>(stmts[i]);
      if (!l || l->body.defined() || !need.uids.count(ir::as<ir::Variable>(l->var)->uid)) continue;
      Reads r;
      r.visit(l->value);
      for (const ir::Buffer& b : r.buffers)
        if (b->scope != Scope::global || written.count(b->uid)) {
          *why = "the TMA loads' offsets need let '" + ir::as<ir::Variable>(l->var)->name +
                 "', whose value reads " + (b->scope == Scope::global ? "tensor '" : "tile '") +
                 b->name + "' (" +
                 (b->scope == Scope::global ? "written by the kernel"
                                            : "not "
                                              "visible to the producer") +
                 ")";
          return false;
        }
      need.visit(l->value);
      out.insert(out.begin(), stmts[i]);
    }
    return true;
  };
  return pick(loop_stmts, loop_stmts.size(), plan.producer_loop_lets) &&
         pick(top, loop_at, plan.producer_lets);
}

/// The first buffer that the producer would read but the consumers write, or null. The
/// producer evaluates the loop's trip count and every TMA load's coordinates itself, running up
/// to `stages` iterations ahead of the consumers, and never runs their statements. A shared
/// tile the consumers fill (a grouped GEMM's group index staged in shared memory), a fragment
/// or local tile (registers the producer's thread never computed), or a global tensor the
/// kernel writes would be read unordered: wrong results seen on the H200. Ordering such a read
/// would make the producer wait for the consumers, which is exactly what the schedule exists to
/// avoid (and, with prologue loads the consumers wait for first, could deadlock), so the kernel
/// is not warp-specialized and runs the plain pipelined loop, whose barriers order the accesses.
ir::Buffer producer_reads_consumer_data(const ir::KernelNode& k, const PipelinePlan& plan) {
  std::set<uint64_t> written;
  ir::for_each_stmt(k.body, [&](const ir::Stmt& s) {
    if (const auto* c = ir::as<ir::Copy>(s)) written.insert(c->dst.buffer->uid);
    if (const auto* st = ir::as<ir::Store>(s)) written.insert(st->buffer->uid);
    if (const auto* a = ir::as<ir::AtomicAdd>(s)) written.insert(a->buffer->uid);
    if (const auto* f = ir::as<ir::Fill>(s)) written.insert(f->dst.buffer->uid);
    if (const auto* g = ir::as<ir::Gemm>(s)) written.insert(g->c.buffer->uid);
    if (const auto* r = ir::as<ir::Reduce>(s)) written.insert(r->dst->uid);
  });
  struct Loads : ir::IRVisitor {
    using ir::IRVisitor::visit;
    std::vector<ir::Buffer> read;
    void visit(const ir::Load* l) override {
      read.push_back(l->buffer);
      ir::IRVisitor::visit(l);
    }
  } loads;
  loads.visit(plan.loop->min);
  loads.visit(plan.loop->extent);
  for (const TmaLoad& l : plan.loads)
    for (const Expr& m : l.copy->src.min)
      loads.visit(m);
  for (const ir::Buffer& b : loads.read)
    if (b->scope != Scope::global || written.count(b->uid)) return b;
  return nullptr;
}

/// The sm_90a TMA warp-specialized plan, or a plan that says why not.
PipelinePlan plan_tma(const ir::KernelNode& k, const LayoutInfo& layouts, const Target& t) {
  PipelinePlan plan;
  if (!t.tma()) {
    plan.reason =
        t.sm90() ? "TMA disabled for this variant (unaligned shapes)" : "no TMA on " + t.arch;
    return plan;
  }
  if (k.threads % 128 != 0 || k.threads > 512) {
    plan.reason = "consumer threads must be a multiple of 128 (at most 512)";
    return plan;
  }
  const auto* body = ir::as<ir::Seq>(k.body);
  if (!body) {
    plan.reason = "no pipelined loop";
    return plan;
  }
  int loops = 0;
  size_t loop_at = 0;
  for (size_t i = 0; i < body->stmts.size(); ++i)
    if (const auto* f = ir::as<ir::For>(body->stmts[i]);
        f && f->for_kind == ir::ForKind::pipelined) {
      plan.loop = f;
      loop_at = i;
      ++loops;
    }
  int nested = 0;
  ir::for_each_stmt(k.body, [&](const ir::Stmt& s) {
    if (const auto* f = ir::as<ir::For>(s); f && f->for_kind == ir::ForKind::pipelined) ++nested;
  });
  if (loops != 1 || nested != 1) {
    plan.loop = nullptr;
    plan.reason = loops == 0 ? "no top-level pipelined loop" : "more than one pipelined loop";
    return plan;
  }
  plan.stages = plan.loop->schedule.stages;
  const std::map<uint64_t, Expr> lets = let_values(k);
  std::string why;
  const auto* lb = ir::as<ir::Seq>(plan.loop->body);
  std::vector<ir::Stmt> loop_stmts = lb ? lb->stmts : std::vector<ir::Stmt>{plan.loop->body};
  for (const ir::Stmt& s : loop_stmts)
    if (const auto* c = ir::as<ir::Copy>(s);
        c && c->src.buffer->scope == Scope::global && c->dst.buffer->scope == Scope::shared) {
      auto l = tma_load(k, c, layouts, lets, &why);
      if (!l) {
        plan.reason = "a copy in the pipelined loop cannot use TMA: " + why;
        plan.loads.clear();
        return plan;
      }
      l->in_loop = true;
      plan.loads.push_back(*l);
      plan.staged.insert(c->dst.buffer->uid);
    }
  if (plan.loads.empty()) {
    plan.reason = "the pipelined loop has no global-to-shared copies";
    return plan;
  }
  // Prologue: top-level global->shared copies before the loop, each filling its tile once.
  for (size_t i = 0; i < loop_at; ++i)
    if (const auto* c = ir::as<ir::Copy>(body->stmts[i]);
        c && c->src.buffer->scope == Scope::global && c->dst.buffer->scope == Scope::shared)
      if (auto l = tma_load(k, c, layouts, lets, &why)) plan.loads.push_back(*l);
  // A tile the producer fills must not be written by anything else, and must be filled by one
  // copy only: the producer issues an iteration's copies ahead of the consumers, so a second
  // copy into the same tile would overwrite what the consumers read between the two (found by
  // the random-program GPU comparison, seed 1587 of 9021ab7).
  std::set<uint64_t> fed;
  for (const TmaLoad& l : plan.loads)
    if (!fed.insert(l.copy->dst.buffer->uid).second) {
      plan.reason = "shared tile '" + l.copy->dst.buffer->name +
                    "' is filled by more than one copy of the pipeline";
      plan.loads.clear();
      plan.staged.clear();
      return plan;
    }
  bool ok = true;
  ir::for_each_stmt(k.body, [&](const ir::Stmt& s) {
    if (const auto* c = ir::as<ir::Copy>(s);
        c && fed.count(c->dst.buffer->uid) && !plan.load_for(c))
      ok = false;
    if (const auto* st = ir::as<ir::Store>(s); st && fed.count(st->buffer->uid)) ok = false;
    if (const auto* f = ir::as<ir::Fill>(s); f && fed.count(f->dst.buffer->uid)) ok = false;
  });
  if (!ok) {
    plan.reason = "a staged tile is also written by the consumers";
    plan.loads.clear();
    plan.staged.clear();
    return plan;
  }
  if (ir::Buffer b = producer_reads_consumer_data(k, plan)) {
    plan.reason = std::string("the TMA producer would read ") + ir::scope_name(b->scope) + " '" +
                  b->name + "' (in a load's coordinates or the trip count), which the " +
                  (b->scope == Scope::global ? "kernel writes" : "consumers compute") +
                  "; a producer runs ahead of the consumers, so that read cannot be ordered";
    plan.loads.clear();
    plan.staged.clear();
    return plan;
  }
  if (!plan_producer_lets(k, body->stmts, loop_at, loop_stmts, plan, &why)) {
    plan.reason = why;
    plan.loads.clear();
    plan.staged.clear();
    plan.producer_lets.clear();
    plan.producer_loop_lets.clear();
    return plan;
  }
  // A gemm under a condition inside the loop: the consumers' warpgroup-wide wgmma sequence and
  // its fences are laid out for gemms at the loop's top level; one in a branch faulted on the
  // H200 (illegal instruction, random program 978 of 9021ab7), so such loops run unspecialized.
  for (const ir::Stmt& s : loop_stmts)
    if (ir::as<ir::IfThenElse>(s)) {
      bool gemm = false;
      ir::for_each_stmt(s, [&](const ir::Stmt& x) { gemm = gemm || ir::as<ir::Gemm>(x); });
      if (gemm) {
        plan.reason = "a gemm inside a conditional of the pipelined loop";
        plan.loads.clear();
        plan.staged.clear();
        plan.producer_lets.clear();
        plan.producer_loop_lets.clear();
        return plan;
      }
    }
  plan.warp_specialized = true;
  plan_warp_specialized_schedules(k, layouts, plan);
  plan_rotation(k, layouts, t, plan);
  return plan;
}

} // namespace

std::string plan_kind(const PipelinePlan& p) {
  return p.warp_specialized ? "tma-warp-specialized"
         : p.cp_async       ? "cp.async multistage"
                            : "serial";
}

PipelinePlan plan_pipeline(const ir::KernelNode& k, const LayoutInfo& layouts, const Target& t) {
  const ScheduleRequests req = schedule_requests(k);
  PipelinePlan plan;
  if (req.cp_async_required)
    plan.reason = "the loop asks for copies = cp_async";
  else
    plan = plan_tma(k, layouts, t);
  // The hardware a request needs exists on this target, so the kernel's own structure is what
  // prevents it: the kernel author must hear why. Without TMA the next plan down runs instead,
  // so the same kernel runs on every target.
  if (!plan.warp_specialized && !req.what.empty()) {
    if (t.tma())
      user_error(req.loc) << "kernel '" << k.name << "': " << req.what_text()
                          << " needs the TMA warp-specialized pipeline, which this kernel "
                             "cannot take on "
                          << t.arch << ": " << plan.reason;
    plan.not_applied = req.what_text() + " not applied: " + plan.reason;
  }
  if (plan.warp_specialized) return plan;
  plan_cp_async(k, plan);
  if (req.cp_async_required && !plan.cp_async)
    user_error(req.cp_async_loc) << "pipelined: copies = cp_async cannot be honoured: "
                                 << plan.cp_async_reason;
  return plan;
}

} // namespace tp::passes
