// The lowering driver: element accesses, parallel loops and control flow. Tile ops are lowered
// in LowerCopy/LowerChunkCopies/LowerGemm/LowerReduce.cpp, the warp-specialized pipeline in
// LowerWarpSpecialized.cpp.
#include "passes/LowerTileOps.h"

#include "ir/IRVisitor.h"
#include "passes/PackFragmentWrites.h"
#include "passes/PairElementWrites.h"
#include "passes/PairSharedWrites.h"

namespace tp::passes {

using ir::Buffer;
using ir::Scope;

namespace {

bool is_var(const Expr& e, const Var& v) {
  const auto* a = ir::as<ir::Variable>(e);
  return a && a->uid == ir::as<ir::Variable>(v)->uid;
}

/// How register fragments are addressed inside a parallel loop anchored on a register layout.
struct RegisterView {
  std::vector<Var> vars; // the loop's variables
  Expr r;                // the anchor register (loop variable of the unrolled register loop)
  Expr rows_r;           // the register of the anchor's row (2-d anchors only)
  Expr cols_r;           // the register of the anchor's column (blocked anchors only)
  bool rows_anchor = false;
  Expr owner; // replicated anchors: the one thread of each replica set that writes memory
};

/// Lowers element accesses: global/shared to flat indices, register fragments through a view.
class AccessLowering : public ir::IRMutator {
public:
  AccessLowering(const LowerContext& cx, const RegisterView* view) : cx_(cx), view_(view) {}

protected:
  using IRMutator::visit;

  /// The register index of a fragment access, or a user error.
  std::vector<Expr> reg_index(const Buffer& b, const std::vector<Expr>& idx, const SourceLoc& loc) {
    const FragmentLayout& l = cx_.layouts.fragment(b);
    if (!view_)
      user_error(loc) << "fragment '" << b->name << "' (in registers, " << l.str()
                      << ") is accessed outside a parallel loop over its layout";
    bool rows = l.kind == FragmentLayout::Kind::rows;
    bool full = idx.size() == view_->vars.size();
    for (size_t d = 0; full && d < idx.size(); ++d)
      full = is_var(idx[d], view_->vars[d]);
    if (full && (rows == view_->rows_anchor)) return l.reg_index(view_->r);
    if (rows && !view_->rows_anchor && idx.size() == 1 && is_var(idx[0], view_->vars[0]))
      return l.reg_index(view_->rows_r);
    if (l.kind == FragmentLayout::Kind::cols && view_->cols_r.defined() && idx.size() == 1 &&
        view_->vars.size() == 2 && is_var(idx[0], view_->vars[1]))
      return l.reg_index(view_->cols_r);
    user_error(loc)
        << "fragment '" << b->name << "' (" << l.str()
        << ") is indexed in a way its register layout cannot serve in this parallel "
           "loop; index it by the loop's variables in order, or copy it to a shared tile";
    return {};
  }

  Expr visit(const ir::Load* op, const Expr&) override {
    std::vector<Expr> idx;
    for (const Expr& i : op->indices)
      idx.push_back(mutate(i));
    const Buffer& b = op->buffer;
    if (cx_.layouts.in_registers(b)) return ir::Load::make(cx_.reg(b), reg_index(b, idx, loc_));
    return cx_.load(b, idx);
  }

  ir::Stmt visit(const ir::Store* op, const ir::Stmt&) override {
    if (op->loc.known()) loc_ = op->loc;
    std::vector<Expr> idx;
    for (const Expr& i : op->indices)
      idx.push_back(mutate(i));
    Expr v = mutate(op->value);
    const Buffer& b = op->buffer;
    if (cx_.layouts.in_registers(b))
      return ir::Store::make(cx_.reg(b), reg_index(b, idx, op->loc), v, op->loc);
    ir::Stmt s = cx_.store(b, idx, v);
    // A loop anchored on a replicated vector runs once per replica: write memory from one.
    if (view_ && view_->owner.defined()) s = if_then(view_->owner, s);
    return s;
  }

  ir::Stmt visit(const ir::AtomicAdd* op, const ir::Stmt&) override {
    std::vector<Expr> idx;
    for (const Expr& i : op->indices)
      idx.push_back(mutate(i));
    Expr v = mutate(op->value);
    const Buffer& b = op->buffer;
    Expr flat = b->scope == Scope::global ? cx_.global_index(b, idx) : cx_.shared_index(b, idx);
    if (b->dtype != DType::f32 && b->dtype != DType::i32)
      user_error(op->loc) << "atomic_add to '" << b->name << "': the CUDA backend supports f32 "
                          << "and i32 atomics; accumulate into an f32 tensor";
    ir::Stmt s = call("tp.atomic_add", {flat, v}, {b});
    if (view_ && view_->owner.defined()) s = if_then(view_->owner, s);
    // A loop that every thread runs whole (it writes a local tile): the atomic once per element.
    if (every_thread_) s = if_then(cx_.tid == 0, s);
    return s;
  }

  const LowerContext& cx_;
  const RegisterView* view_;
  SourceLoc loc_;
  bool every_thread_ = false;
};

class TileLowering : public AccessLowering {
public:
  explicit TileLowering(LowerContext& cx) : AccessLowering(cx, nullptr), cxm_(cx) {}

  ir::Stmt lower_parallel(const ir::Parallel* p) {
    const ParallelFragments fa = parallel_fragments(cx_.layouts, p);
    if (fa.anchor && fa.local_written)
      user_error(p->loc) << "parallel loop over register fragment '" << fa.anchor->name
                         << "' stores into local tile '" << fa.local_written->name
                         << "': each thread runs only its own elements of the fragment, but a "
                            "local tile must hold the same values in every thread; store into a "
                            "fragment or shared tile instead";
    if (fa.anchor) {
      const FragmentLayout& l = cx_.layouts.fragment(fa.anchor);
      RegisterView view;
      view.vars = p->vars;
      Var r("r");
      view.r = r;
      view.rows_anchor = l.kind == FragmentLayout::Kind::rows;
      if (l.rank() == 2) view.rows_r = l.rows_reg(r);
      if (l.kind == FragmentLayout::Kind::blocked) view.cols_r = l.cols_reg(r);
      view.owner = l.owner(cx_.tid);
      ir::Stmt body = AccessLowering(cx_, &view).mutate(p->body);
      std::vector<Expr> c = l.coords(cx_.tid, r);
      internal_assert(c.size() == p->vars.size()) << "parallel loop over " << fa.anchor->name;
      for (int d = static_cast<int>(c.size()) - 1; d >= 0; --d)
        body = ir::Let::make(p->vars[d], c[d], body);
      // Registers past the tile's last row (a blocked layout's ragged row block) hold nothing.
      if (Expr ok = l.valid(cx_.tid, r); ok.defined()) body = if_then(ok, body);
      if (ir::Stmt paired = pair_element_writes(cxm_, fa.anchor, r, body, p->loc); paired.defined())
        return paired;
      if (ir::Stmt packed = pack_fragment_writes(cxm_, fa.anchor, r, body, p->loc);
          packed.defined())
        return packed;
      return unrolled_for(r, l.regs_per_thread(), body);
    }
    if (fa.any_register)
      user_error(p->loc) << "parallel loop uses register fragment '" << fa.any_register->name
                         << "' but no fragment in it is indexed by all of the loop's variables; "
                            "the loop has no register layout to follow";
    // No register fragment: spread the iterations over the consumer threads.
    // A loop that stores into a local tile runs whole in every thread, so that every thread's
    // copy of the tile gets every element (other stores then write the same value from every
    // thread; atomics are issued by thread 0 only).
    const bool every_thread = fa.local_written != nullptr;
    if (!every_thread)
      if (ir::Stmt paired =
              pair_shared_writes(cxm_, p, [&](const ir::Stmt& s) { return mutate(s); });
          paired.defined())
        return paired;
    every_thread_ = every_thread;
    ir::Stmt body = mutate(p->body);
    every_thread_ = false;
    return index_space_for(cx_, p->vars, p->extents, every_thread, body);
  }

protected:
  using AccessLowering::visit;

  ir::Stmt visit(const ir::Allocate* op, const ir::Stmt& self) override {
    const Buffer& b = op->buffer;
    if (cx_.layouts.in_registers(b)) return ir::Allocate::make(cx_.reg(b), op->loc);
    if (cx_.layouts.in_shared(b)) return ir::Stmt(); // placed by PlanSharedMemory
    return self;                                     // a local tile
  }
  ir::Stmt visit(const ir::Copy* op, const ir::Stmt&) override { return lower_copy(cxm_, op); }
  ir::Stmt visit(const ir::Fill* op, const ir::Stmt&) override { return lower_fill(cxm_, op); }
  ir::Stmt visit(const ir::Gemm* op, const ir::Stmt&) override { return lower_gemm(cxm_, op); }
  ir::Stmt visit(const ir::Reduce* op, const ir::Stmt&) override { return lower_reduce(cxm_, op); }
  ir::Stmt visit(const ir::Parallel* op, const ir::Stmt&) override { return lower_parallel(op); }
  ir::Stmt visit(const ir::For* op, const ir::Stmt&) override {
    if (cx_.plan.cp_async && op == cx_.plan.loop) return lower_cp_async_loop(cxm_, op);
    Expr mn = mutate(op->min), ext = mutate(op->extent);
    ir::ForKind k = op->for_kind == ir::ForKind::pipelined ? ir::ForKind::serial : op->for_kind;
    return ir::For::make(op->var, mn, ext, k, {}, mutate(op->body), op->loc);
  }
  ir::Stmt visit(const ir::Evaluate* op, const ir::Stmt& self) override {
    if (const auto* i = ir::as<ir::Intrinsic>(op->value); i && i->name == "tp.barrier")
      return cx_.barrier();
    return self;
  }
  ir::Stmt visit(const ir::Print* op, const ir::Stmt&) override {
    if (op->tile)
      user_error(op->loc) << "print of a whole tile is supported by the CPU interpreter only; "
                             "print elements inside a parallel loop instead";
    return if_then(cx_.tid == 0, call("tp.print", {mutate(op->value)}, {}));
  }

  LowerContext& cxm_;
};

} // namespace

Expr lower_expr(const LowerContext& cx, const Expr& e) {
  return AccessLowering(cx, nullptr).mutate(e);
}

ir::Stmt lower_stmt(LowerContext& cx, const ir::Stmt& s) {
  return TileLowering(cx).mutate(s);
}

ir::Stmt lower_tile_ops(LowerContext& cx) {
  if (cx.plan.warp_specialized) return lower_warp_specialized(cx);
  return TileLowering(cx).mutate(cx.k.body);
}

} // namespace tp::passes
