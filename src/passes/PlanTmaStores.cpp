// TMA store planning (see PlanTmaStores.h): finding the qualifying copies, then fitting their
// chunk buffers into shared memory.
#include "passes/PlanTmaStores.h"

#include <algorithm>

#include "ir/IRVisitor.h"
#include "passes/BufferAccesses.h"
#include "passes/PlanPipeline.h"
#include "passes/PlanSharedMemory.h"

namespace tp::passes {

namespace {

using ir::Scope;

/// The copies of the kernel outside the pipelined loop, in program order, and whether each is
/// in some other loop.
class CopiesOutsideLoop : public ir::IRVisitor {
public:
  explicit CopiesOutsideLoop(const ir::For* loop) : loop_(loop) {}
  std::vector<std::pair<const ir::Copy*, bool>> copies;
  using ir::IRVisitor::visit;

protected:
  void visit(const ir::For* op) override {
    if (op == loop_) return;
    ++depth_;
    ir::IRVisitor::visit(op);
    --depth_;
  }
  void visit(const ir::Copy* op) override { copies.emplace_back(op, depth_ > 0); }

private:
  const ir::For* loop_;
  int depth_ = 0;
};

/// Whether the kernel reads or writes the buffer of copy `c`'s destination anywhere but in `c`.
bool accessed_elsewhere(const ir::KernelNode& k, const ir::Copy* c) {
  struct Drop : ir::IRMutator {
    const ir::Copy* c;
    using ir::IRMutator::visit;
    ir::Stmt visit(const ir::Copy* op, const ir::Stmt& self) override {
      return op == c ? ir::Seq::make({}) : self;
    }
  } drop;
  drop.c = c;
  return buffer_accesses(drop.mutate(k.body)).touches(c->dst.buffer->uid);
}

/// The store for copy `c`, or why it does not qualify (the rules of PlanTmaStores.h that
/// depend on the copy alone).
std::string qualify(const ir::KernelNode& k, const LayoutInfo& layouts, const ir::Copy* c,
                    TmaStore& s) {
  const ir::Region &src = c->src, &dst = c->dst;
  if (!layouts.in_registers(src.buffer) || dst.buffer->scope != Scope::global)
    return "not a register-to-global copy";
  const FragmentLayout& l = layouts.fragment(src.buffer);
  if (l.kind != FragmentLayout::Kind::wgmma_acc || !ir::is_whole(src))
    return "not a whole wgmma accumulator";
  if (src.buffer->dtype != DType::f32 || dtype_bytes(dst.buffer->dtype) != 2)
    return "not an f32 accumulator into a 16-bit tensor";
  const int rank = dst.buffer->rank();
  std::vector<int> outer;
  for (int d = 0; d + 1 < rank; ++d)
    if (dst.extent[d] != 1) outer.push_back(d);
  if (rank < 2 || rank > 5 || outer.size() != 1 || dst.extent.back() != l.N ||
      dst.extent[outer[0]] != l.M)
    return "the accumulator's columns are not the tensor's contiguous dimension with its rows "
           "along one other";
  s.chunk_cols = 128 / dtype_bytes(dst.buffer->dtype);
  if (l.N % s.chunk_cols != 0 || l.M > 256)
    return "the accumulator is not whole 64-column chunks of at most 256 rows";
  for (size_t i = 0; i < k.params.size(); ++i)
    if (k.params[i]->uid == dst.buffer->uid) s.param = static_cast<int>(i);
  if (s.param < 0 || s.param >= 64) return "not one of the kernel's first 64 parameters";
  if (accessed_elsewhere(k, c))
    return "the kernel accesses '" + dst.buffer->name + "' elsewhere too";
  s.copy = c;
  s.rows = l.M;
  s.chunks = l.N / s.chunk_cols;
  s.box = {s.chunk_cols};
  for (int d = rank - 2; d >= 0; --d)
    s.box.push_back(dst.extent[d]);
  return "";
}

/// The copies that qualify, ignoring shared memory (plan_tma_stores' first step).
std::vector<TmaStore> find_tma_stores(const ir::KernelNode& k, const LayoutInfo& layouts,
                                      const PipelinePlan& plan, const Target& t,
                                      uint64_t* candidates, std::string* note) {
  std::vector<TmaStore> out;
  *candidates = 0;
  if (!plan.warp_specialized || !t.tma()) {
    *note = "the kernel is not warp-specialized with TMA";
    return out;
  }
  if (auto it = k.attrs.find("tma_stores"); it != k.attrs.end() && it->second == "0") {
    *note = "the kernel's annotation tma_stores = 0";
    return out;
  }
  CopiesOutsideLoop finder(plan.loop);
  finder.visit(k.body);
  for (const auto& [c, in_loop] : finder.copies) {
    if (c->dst.buffer->scope != Scope::global) continue;
    TmaStore s;
    std::string why = qualify(k, layouts, c, s);
    if (!why.empty()) {
      if (note->empty()) *note = "'" + c->dst.buffer->name + "': " + why;
      continue;
    }
    *candidates |= uint64_t{1} << s.param;
    if ((t.tma_store_params >> s.param) & 1) {
      s.first_use = out.empty() && !in_loop && !plan.persistent;
      out.push_back(s);
    } else if (note->empty())
      *note = "'" + c->dst.buffer->name + "': this launch's rows or base are not 16-byte aligned";
  }
  return out;
}

} // namespace

void plan_tma_stores(const ir::KernelNode& k, const LayoutInfo& layouts, const Target& t,
                     PipelinePlan& plan) {
  plan.store_note.clear();
  plan.stores = find_tma_stores(k, layouts, plan, t, &plan.tma_store_candidates, &plan.store_note);
  if (plan.stores.empty()) return;
  const int64_t limit = t.smem_limit(k.smem_limit, k.blocks_per_sm);
  const int64_t need = place_shared_memory(k, layouts, plan).total_bytes;
  if (need > limit) {
    plan.store_note = "no room: the two chunk buffers take the kernel to " + std::to_string(need) +
                      " bytes of shared memory, over its " + std::to_string(limit);
    plan.stores.clear();
  }
}

} // namespace tp::passes
