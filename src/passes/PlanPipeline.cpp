// Pipeline planning: find the pipelined loop and the copies a TMA producer can take over.
#include "passes/PlanPipeline.h"

#include <optional>

#include "ir/IRVisitor.h"

namespace tp::passes {

const TmaLoad* PipelinePlan::load_for(const ir::Copy* c) const {
  for (const TmaLoad& l : loads)
    if (l.copy == c) return &l;
  return nullptr;
}

namespace {

using ir::Scope;

/// A TMA load for `c`, or an empty optional with the reason in `why`.
std::optional<TmaLoad> tma_load(const ir::KernelNode& k, const ir::Copy* c,
                                const LayoutInfo& layouts, std::string* why) {
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
  // The tile's rows must be the one other non-unit dimension.
  int other = -1;
  for (int d = 0; d < rank - 1; ++d)
    if (src.extent[d] != 1) {
      if (other >= 0) {
        *why = "the box spans more than two tensor dimensions";
        return std::nullopt;
      }
      other = d;
    }
  if (ds[0] != 1 && other < 0) {
    *why = "unexpected box";
    return std::nullopt;
  }
  const SharedLayout& sl = layouts.shared_layout(dst.buffer);
  int eb = dtype_bytes(dst.buffer->dtype);
  TmaLoad l;
  l.copy = c;
  for (size_t i = 0; i < k.params.size(); ++i)
    if (k.params[i]->uid == src.buffer->uid) l.param = static_cast<int>(i);
  l.swizzle_bytes = sl.kind == SharedLayout::Kind::swizzled ? sl.swizzle_bytes : 0;
  int64_t inner = l.swizzle_bytes ? l.swizzle_bytes / eb : ds[1];
  if (inner * eb % 16 != 0 || inner > 256 || ds[0] > 256) {
    *why = "the tile is not a valid TMA box (rows <= 256, row bytes a multiple of 16)";
    return std::nullopt;
  }
  l.boxes = ds[1] / inner;
  for (int d = rank - 1; d >= 0; --d) l.box.push_back(d == rank - 1 ? inner : src.extent[d]);
  l.bytes = ds[0] * ds[1] * eb;
  return l;
}

} // namespace

PipelinePlan plan_pipeline(const ir::KernelNode& k, const LayoutInfo& layouts, const Target& t) {
  PipelinePlan plan;
  if (!t.tma()) {
    plan.reason = t.sm90() ? "TMA disabled for this variant (unaligned shapes)" : "no TMA on " + t.arch;
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
    if (const auto* f = ir::as<ir::For>(body->stmts[i]); f && f->for_kind == ir::ForKind::pipelined) {
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
  plan.stages = plan.loop->stages;
  std::string why;
  const auto* lb = ir::as<ir::Seq>(plan.loop->body);
  std::vector<ir::Stmt> loop_stmts = lb ? lb->stmts : std::vector<ir::Stmt>{plan.loop->body};
  for (const ir::Stmt& s : loop_stmts)
    if (const auto* c = ir::as<ir::Copy>(s); c && c->src.buffer->scope == Scope::global &&
                                             c->dst.buffer->scope == Scope::shared) {
      auto l = tma_load(k, c, layouts, &why);
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
    if (const auto* c = ir::as<ir::Copy>(body->stmts[i]); c && c->src.buffer->scope == Scope::global &&
                                                       c->dst.buffer->scope == Scope::shared)
      if (auto l = tma_load(k, c, layouts, &why)) plan.loads.push_back(*l);
  // A tile the producer fills must not be written by anything else.
  std::set<uint64_t> fed;
  for (const TmaLoad& l : plan.loads) fed.insert(l.copy->dst.buffer->uid);
  bool ok = true;
  ir::for_each_stmt(k.body, [&](const ir::Stmt& s) {
    if (const auto* c = ir::as<ir::Copy>(s); c && fed.count(c->dst.buffer->uid) && !plan.load_for(c))
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
  plan.warp_specialized = true;
  return plan;
}

} // namespace tp::passes
