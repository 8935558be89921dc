// Shared-memory placement: every shared buffer gets its own space (see Placer), then the
// reductions' cross-warp scratch.
#include "passes/PlanSharedMemory.h"

#include <algorithm>
#include <sstream>

#include "ir/IRVisitor.h"

namespace tp::passes {

const SmemPlan::Slot& SmemPlan::slot(const ir::Buffer& b) const {
  auto it = slots.find(b->uid);
  internal_assert(it != slots.end()) << "shared buffer " << b->name << " was not placed";
  return it->second;
}

namespace {

int64_t align(int64_t x, int64_t a) {
  return (x + a - 1) / a * a;
}

/// Walks scopes, giving every shared buffer its own space. Space is not reused when a scope
/// ends: threads still writing a dead tile would race with threads already writing the next one
/// placed there, and no barrier orders the two (InsertBarriers sees two different buffers). The
/// random-program GPU comparison found such a race (an `if` scope's tile, then a tile placed on
/// it). Reuse can come back together with a barrier at the scope's end.
class Placer : public ir::IRVisitor {
public:
  Placer(const LayoutInfo& l, const PipelinePlan& p, SmemPlan& out) : l_(l), p_(p), out_(out) {}
  int64_t high = 0;

public:
  using IRVisitor::visit;

protected:
  void visit(const ir::Allocate* op) override {
    const ir::Buffer& b = op->buffer;
    if (!l_.in_shared(b)) return;
    SmemPlan::Slot s;
    s.stages = p_.staged.count(b->uid) ? p_.stages : p_.rotated.count(b->uid) ? 2 : 1;
    s.stage_elems = l_.shared_layout(b).size_elems();
    s.stage_bytes = align(s.stage_elems * dtype_bytes(b->dtype), 1024);
    s.offset = align(top_, 1024);
    top_ = s.offset + s.stage_bytes * s.stages;
    high = std::max(high, top_);
    out_.slots[b->uid] = s;
  }

private:
  const LayoutInfo& l_;
  const PipelinePlan& p_;
  SmemPlan& out_;
  int64_t top_ = 0;
};

} // namespace

SmemPlan place_shared_memory(const ir::KernelNode& k, const LayoutInfo& layouts,
                             const PipelinePlan& plan) {
  SmemPlan out;
  Placer placer(layouts, plan, out);
  placer.visit(k.body);
  int64_t top = placer.high;
  // The TMA stores' chunk buffers: 128-byte swizzled like a TMA-loaded tile, so 1024-aligned.
  if (int64_t b = plan.store_staging_bytes()) {
    out.store_staging = align(top, 1024);
    top = out.store_staging + b;
  }
  // Cross-warp reduction scratch (f32, read and written by ordinary loads and stores) after the
  // tiles; it needs no 1024-byte alignment.
  std::vector<ir::Buffer> scratch; // in program order, so that offsets are deterministic
  ir::for_each_stmt(k.body, [&](const ir::Stmt& st) {
    const auto* r = ir::as<ir::Reduce>(st);
    if (r && layouts.reduce_scratch.count(r)) scratch.push_back(layouts.reduce_scratch.at(r));
  });
  for (const ir::Buffer& b : scratch) {
    SmemPlan::Slot s;
    s.stage_elems = layouts.shared_layout(b).size_elems();
    s.stage_bytes = align(s.stage_elems * 4, 16);
    s.offset = align(top, 16);
    top = s.offset + s.stage_bytes;
    out.slots[b->uid] = s;
  }
  out.barrier_offset = align(top, 8);
  // Persistent kernels add tile_empty and the tile-index slot (8 bytes each).
  out.num_barriers = plan.warp_specialized ? 2 * plan.stages + 1 + (plan.persistent ? 2 : 0) : 0;
  out.total_bytes = out.barrier_offset + 8 * out.num_barriers;
  return out;
}

SmemPlan plan_shared_memory(const ir::KernelNode& k, const LayoutInfo& layouts,
                            const PipelinePlan& plan, const Target& t) {
  SmemPlan out = place_shared_memory(k, layouts, plan);
  // What the kernel states (a limit, or its share of the SM for blocks_per_sm > 1) holds in
  // every plan; the target's own per-block limit only where enforced (a tuner's estimate
  // compares with the device's limit itself).
  const bool stated = k.smem_limit > 0 || k.blocks_per_sm > 1;
  const int64_t limit = t.smem_limit(k.smem_limit, k.blocks_per_sm);
  if ((t.enforce_smem_limit || stated) && out.total_bytes > limit) {
    std::ostringstream os;
    ir::for_each_stmt(k.body, [&](const ir::Stmt& s) {
      if (const auto* a = ir::as<ir::Allocate>(s); a && out.slots.count(a->buffer->uid)) {
        const auto& sl = out.slots.at(a->buffer->uid);
        os << " '" << a->buffer->name << "' " << sl.stage_elems * dtype_bytes(a->buffer->dtype)
           << " B x " << sl.stages << (sl.stages > 1 ? " stages" : " stage") << ";";
      }
    });
    if (out.store_staging >= 0) os << " TMA store chunks " << plan.store_staging_bytes() << " B;";
    user_error(k.loc) << "kernel '" << k.name << "' needs " << out.total_bytes
                      << " bytes of shared memory on " << t.arch << ", over the limit of " << limit
                      << " bytes"
                      << (k.blocks_per_sm > 1 ? " (its share of the SM for blocks_per_sm = " +
                                                    std::to_string(k.blocks_per_sm) + ")"
                                              : std::string())
                      << ":" << os.str() << " use smaller tiles, fewer stages"
                      << (k.blocks_per_sm > 1 ? " or fewer blocks per SM" : "");
  }
  return out;
}

} // namespace tp::passes
