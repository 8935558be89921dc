// LowerContext: addressing of every kind of buffer in lowered IR, and statement builders.
#include "passes/LowerContext.h"

#include "ir/IRVisitor.h"

namespace tp::passes {

using ir::Buffer;
using ir::Scope;

LowerContext::LowerContext(const ir::KernelNode& kn, const Target& t, const LayoutInfo& l,
                           const PipelinePlan& p, const SmemPlan& s)
    : k(kn), target(t), layouts(l), plan(p), smem(s), tid("tid") {
  // Register arrays for register-resident fragments.
  ir::for_each_stmt(k.body, [&](const ir::Stmt& st) {
    const auto* a = ir::as<ir::Allocate>(st);
    if (!a || !layouts.in_registers(a->buffer)) return;
    const FragmentLayout& fl = layouts.fragment(a->buffer);
    std::vector<Expr> shape;
    for (int64_t e : fl.reg_shape())
      shape.push_back(Expr(e));
    regs[a->buffer->uid] = ir::make_buffer(a->buffer->name, Scope::local, a->buffer->dtype, shape,
                                           a->buffer->kernel_uid, a->buffer->loc);
  });
}

ir::Stmt LowerContext::barrier() const {
  ir::Stmt sync = plan.warp_specialized
                      ? call("tp::block::named_sync", {Expr(1), Expr(consumer_threads())})
                      : call("tp::block::sync");
  if (!target.sm90()) return sync;
  // wgmma reads shared memory through the async proxy: ordinary stores into a tile a later
  // wgmma reads are visible to it only after fence.proxy.async by the writing threads, before
  // the barrier that hands the tile over. Without it wgmma can read stale data (seen on the
  // H200 as missing partial sums in the no-TMA GEMM variant).
  return seq({call("tp::sm90::fence_proxy_async_shared"), sync});
}

ir::Stmt LowerContext::thread_barrier() const {
  return plan.warp_specialized ? call("tp::block::named_sync", {Expr(1), Expr(consumer_threads())})
                               : call("tp::block::sync");
}

const Buffer& LowerContext::reg(const Buffer& frag) const {
  auto it = regs.find(frag->uid);
  internal_assert(it != regs.end()) << "no register array for " << frag->name;
  return it->second;
}

bool LowerContext::strided(const Buffer& b) const {
  if (b->strides.empty()) return false;
  int i = param_index(b);
  // view_params has 64 bits: a parameter past them is always indexed as a view, which is right
  // for any argument.
  return i < 0 || i >= 64 || ((target.view_params >> i) & 1);
}

int LowerContext::param_index(const Buffer& b) const {
  for (size_t i = 0; i < k.params.size(); ++i)
    if (k.params[i]->uid == b->uid) return static_cast<int>(i);
  return -1;
}

bool LowerContext::even_rows(const Buffer& b) const {
  int i = param_index(b);
  return i >= 0 && i < 64 && ((target.even_rows >> i) & 1);
}

Expr LowerContext::global_index(const Buffer& b, const std::vector<Expr>& idx) const {
  internal_assert(static_cast<int>(idx.size()) == b->rank()) << "index rank for " << b->name;
  if (strided(b)) {
    Expr flat = idx[0] * b->strides[0];
    for (int d = 1; d < b->rank(); ++d)
      flat = flat + idx[d] * b->strides[d];
    return flat;
  }
  Expr flat = idx[0];
  for (int d = 1; d < b->rank(); ++d)
    flat = flat * b->shape[d] + idx[d];
  return flat;
}

Expr LowerContext::rows_aligned(const Buffer& b, int64_t per) const {
  if (!strided(b)) return b->shape.back() % per == 0;
  Expr ok = b->strides.back() == 1;
  for (int d = 0; d + 1 < b->rank(); ++d)
    ok = ok && b->strides[d] % per == 0;
  return ok;
}

Expr LowerContext::inner_contiguous(const Buffer& b) const {
  if (!strided(b)) return Expr(true);
  return b->strides.back() == 1;
}

Expr LowerContext::global_in_bounds(const Buffer& b, const std::vector<Expr>& idx) const {
  Expr ok;
  for (int d = 0; d < b->rank(); ++d) {
    Expr c = idx[d] < b->shape[d];
    if (!(idx[d].as_int() && *idx[d].as_int() >= 0)) c = idx[d] >= 0 && c;
    ok = ok.defined() ? (ok && c) : c;
  }
  return ok;
}

Expr LowerContext::stage_base(const Buffer& b) const {
  auto it = stage.find(b->uid);
  if (it == stage.end()) return Expr(0);
  // Stages lie stage_bytes apart (1024-aligned, for TMA and swizzle atoms), as gemm and TMA
  // addresses count them; stage_elems would disagree for a tile that is not 1024 bytes a stage.
  return it->second * (smem.slot(b).stage_bytes / dtype_bytes(b->dtype));
}

void LowerContext::stage_after_loop(const std::set<uint64_t>& staged, const Expr& n, int stages) {
  Expr last = ir::Select::make(n > 0, (n + (stages - 1)) % stages, Expr(0));
  if (const int64_t* c = n.as_int()) last = Expr(*c > 0 ? (*c - 1) % stages : 0);
  for (uint64_t u : staged)
    stage[u] = last;
}

Expr LowerContext::shared_index(const Buffer& b, const std::vector<Expr>& idx) const {
  auto [row, col] = shared_row_col(b, idx);
  return stage_base(b) + layouts.shared_layout(b).offset(row, col);
}

Expr LowerContext::load(const Buffer& b, const std::vector<Expr>& idx) const {
  if (b->scope == Scope::global) return ir::Load::make(b, {global_index(b, idx)});
  if (layouts.in_shared(b)) return ir::Load::make(b, {shared_index(b, idx)});
  internal_assert(b->scope == Scope::local) << "load of register fragment " << b->name;
  return ir::Load::make(b, idx);
}

ir::Stmt LowerContext::store(const Buffer& b, const std::vector<Expr>& idx, const Expr& v) const {
  if (b->scope == Scope::global) return ir::Store::make(b, {global_index(b, idx)}, v, {});
  if (layouts.in_shared(b)) return ir::Store::make(b, {shared_index(b, idx)}, v, {});
  internal_assert(b->scope == Scope::local) << "store to register fragment " << b->name;
  return ir::Store::make(b, idx, v, {});
}

Expr LowerContext::reg_load(const Buffer& frag, int r) const {
  return ir::Load::make(reg(frag), layouts.fragment(frag).reg_index(Expr(r)));
}

ir::Stmt LowerContext::reg_store(const Buffer& frag, int r, const Expr& v) const {
  return ir::Store::make(reg(frag), layouts.fragment(frag).reg_index(Expr(r)), v, {});
}

// ---------------------------------------------------------------------------------------------

ir::Stmt call(const std::string& name, std::vector<Expr> args, std::vector<Buffer> buffers) {
  return ir::Evaluate::make(
      ir::Intrinsic::make(name, std::move(args), DType::i32, std::move(buffers), false));
}

Expr call_expr(const std::string& name, std::vector<Expr> args, DType t,
               std::vector<Buffer> buffers) {
  return ir::Intrinsic::make(name, std::move(args), t, std::move(buffers), true);
}

ir::Stmt seq(std::vector<ir::Stmt> s) {
  std::vector<ir::Stmt> out;
  for (auto& x : s)
    if (x.defined()) out.push_back(std::move(x));
  if (out.size() == 1) return out[0];
  return ir::Seq::make(std::move(out));
}

ir::Stmt unrolled_for(const Var& v, int64_t n, ir::Stmt body) {
  return ir::For::make(v, Expr(0), Expr(n), ir::ForKind::unrolled, {}, std::move(body), {});
}

ir::Stmt serial_for(const Var& v, Expr min, Expr extent, ir::Stmt body) {
  return ir::For::make(v, std::move(min), std::move(extent), ir::ForKind::serial, {},
                       std::move(body), {});
}

ir::Stmt if_then(Expr c, ir::Stmt t, ir::Stmt e) {
  return ir::IfThenElse::make(std::move(c), std::move(t), std::move(e), {});
}

ir::Stmt strided_for(const LowerContext& cx, int64_t n, const std::function<ir::Stmt(Expr)>& body,
                     bool rolled) {
  Var it("it");
  int64_t T = cx.consumer_threads();
  int64_t trips = (n + T - 1) / T;
  Expr e = it * T + cx.tid;
  ir::Stmt b = body(e);
  if (n % T != 0) b = if_then(e < n, b);
  return ir::For::make(it, Expr(0), Expr(trips),
                       trips <= 8 && !rolled ? ir::ForKind::unrolled : ir::ForKind::serial, {}, b,
                       {});
}

ir::Stmt element_for(const LowerContext& cx, int64_t n, bool every_thread,
                     const std::function<ir::Stmt(Expr)>& body) {
  if (!every_thread) return strided_for(cx, n, body);
  Var e("le");
  return ir::For::make(e, Expr(0), Expr(n), n <= 16 ? ir::ForKind::unrolled : ir::ForKind::serial,
                       {}, body(e), {});
}

ir::Stmt index_space_for(const LowerContext& cx, const std::vector<Var>& vars,
                         const std::vector<int64_t>& extents, bool every_thread,
                         const ir::Stmt& body) {
  int64_t n = 1;
  for (int64_t e : extents)
    n *= e;
  return element_for(cx, n, every_thread, [&](Expr e) {
    ir::Stmt b = body;
    int64_t stride = 1;
    std::vector<Expr> vals(vars.size());
    for (int d = static_cast<int>(vars.size()) - 1; d >= 0; --d) {
      vals[d] = (e / stride) % extents[d];
      stride *= extents[d];
    }
    for (int d = static_cast<int>(vars.size()) - 1; d >= 0; --d)
      b = ir::Let::make(vars[d], vals[d], b);
    return b;
  });
}

namespace {
class Substitute : public ir::IRMutator {
public:
  explicit Substitute(const std::map<uint64_t, Expr>& m) : m_(m) {}

protected:
  using IRMutator::visit;
  Expr visit(const ir::Variable* op, const Expr& self) override {
    auto it = m_.find(op->uid);
    return it == m_.end() ? self : it->second;
  }

private:
  const std::map<uint64_t, Expr>& m_;
};
} // namespace

Expr substitute(const Expr& e, const std::map<uint64_t, Expr>& m) {
  return Substitute(m).mutate(e);
}
ir::Stmt substitute(const ir::Stmt& s, const std::map<uint64_t, Expr>& m) {
  return Substitute(m).mutate(s);
}

} // namespace tp::passes
