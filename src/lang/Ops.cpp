// Tile ops of the builder. Each checks its operands where the user wrote the call, so that an
// invalid kernel is reported with that source location, the buffer and the rule.
#include <sstream>

#include "ir/CopyShape.h"
#include "lang/Builder.h"
#include "tilepilot/lang.h"

namespace tp {

using ir::Scope;
using lang::to_loc;

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i)
    os << (i ? ", " : "") << s[i];
  os << "]";
  return os.str();
}

Tile alloc(Scope scope, std::vector<int64_t> shape, DType t, Loc l) {
  SourceLoc loc = to_loc(l);
  const char* op = scope == Scope::shared     ? "alloc_shared"
                   : scope == Scope::fragment ? "alloc_fragment"
                                              : "alloc_local";
  lang::KernelBuilder& kb = lang::current(op, loc);
  if (kb.parallel_depth > 0)
    user_error(loc) << op << " inside parallel: allocate tiles outside element-wise loops";
  if (shape.empty() || shape.size() > 3)
    user_error(loc) << op << ": tiles have 1 to 3 dimensions, got " << shape.size();
  for (int64_t e : shape)
    if (e <= 0)
      user_error(loc) << op << ": tile extents must be positive, got " << shape_str(shape);
  if (t == DType::boolean) user_error(loc) << op << ": bool tiles are not supported; use i32";
  std::vector<Expr> sh(shape.begin(), shape.end());
  std::string name = std::string(scope == Scope::shared     ? "shared"
                                 : scope == Scope::fragment ? "frag"
                                                            : "local") +
                     std::to_string(kb.tiles++);
  ir::Buffer b = ir::make_buffer(name, scope, t, std::move(sh), kb.kernel_uid, loc);
  if (scope == Scope::shared) {
    int64_t bytes = b->const_elements() * dtype_bytes(t);
    kb.smem_bytes += bytes;
    if (kb.smem_limit > 0 && kb.smem_bytes > kb.smem_limit)
      user_error(loc) << "alloc_shared: tile " << shape_str(shape) << " " << dtype_name(t) << " ("
                      << bytes << " bytes) brings the kernel's shared memory to " << kb.smem_bytes
                      << " bytes, over the stated limit of " << kb.smem_limit
                      << " bytes; use smaller tiles or fewer stages";
  }
  lang::append(ir::Allocate::make(b, loc));
  return Tile(b);
}

/// Turns an operand into a region; `other` gives the extents of a tensor box without them.
ir::Region resolve(const Operand& o, const std::vector<int64_t>* other, const char* op,
                   const SourceLoc& loc) {
  const TileRef& r = o.ref;
  lang::check_owner(r.buffer, op, loc);
  ir::Region reg;
  reg.buffer = r.buffer;
  if (o.whole) return ir::whole(r.buffer);
  reg.min = r.min;
  if (!r.extent.empty()) {
    reg.extent = r.extent;
    return reg;
  }
  if (!other)
    user_error(loc) << op << ": the box of '" << r.buffer->name
                    << "' has no extents and nothing to take them from; write " << r.buffer->name
                    << ".tile({offsets}, {extents})";
  int n = r.buffer->rank(), k = static_cast<int>(other->size());
  if (k > n)
    user_error(loc) << op << ": a " << k << "-d tile does not fit in the " << n << "-d tensor '"
                    << r.buffer->name << "'";
  reg.extent.assign(n - k, 1);
  reg.extent.insert(reg.extent.end(), other->begin(), other->end());
  return reg;
}

bool has_extents(const Operand& o) {
  return o.whole || !o.ref.extent.empty();
}

std::vector<int64_t> extents_of(const Operand& o) {
  return o.whole ? o.ref.buffer->const_shape() : o.ref.extent;
}

} // namespace

Tile alloc_shared(std::vector<int64_t> shape, DType t, Loc l) {
  return alloc(Scope::shared, std::move(shape), t, l);
}
Tile alloc_fragment(std::vector<int64_t> shape, DType t, Loc l) {
  return alloc(Scope::fragment, std::move(shape), t, l);
}
Tile alloc_local(std::vector<int64_t> shape, DType t, Loc l) {
  return alloc(Scope::local, std::move(shape), t, l);
}

void copy(const Operand& src, const Operand& dst, Loc l) {
  SourceLoc loc = to_loc(l);
  lang::KernelBuilder& kb = lang::current("copy", loc);
  if (kb.parallel_depth > 0)
    user_error(loc) << "copy inside parallel: copy is a tile op; assign elements instead";
  const ir::Buffer& sb = src.ref.buffer;
  const ir::Buffer& db = dst.ref.buffer;
  if (sb->scope == Scope::global && db->scope == Scope::global)
    user_error(loc) << "copy from '" << sb->name << "' to '" << db->name
                    << "': both are global tensors; stage the data through a shared or "
                       "fragment tile";
  std::vector<int64_t> se, de;
  const std::vector<int64_t>* sp = nullptr;
  const std::vector<int64_t>* dp = nullptr;
  if (has_extents(src)) se = extents_of(src), sp = &se;
  if (has_extents(dst)) de = extents_of(dst), dp = &de;
  ir::Region s = resolve(src, dp ? &de : nullptr, "copy", loc);
  ir::Region d = resolve(dst, sp ? &se : nullptr, "copy", loc);
  if (!ir::copy_compatible(s.squeezed(), d.squeezed()))
    user_error(loc) << "copy: shape mismatch: source '" << sb->name << "' box "
                    << shape_str(s.extent) << " vs destination '" << db->name << "' box "
                    << shape_str(d.extent)
                    << "; the two boxes must have the same extents (unit dimensions aside), or "
                       "the same number of elements and the same innermost extent (the outer "
                       "dimensions are then flattened row-major, as a [2, 64, 32] box into a "
                       "[128, 32] tile): change the box's extents or the tile's shape";
  lang::append(ir::Copy::make(std::move(s), std::move(d), loc));
}

void gemm(const Operand& a, const Operand& b, const Operand& c, GemmOptions o, Loc l) {
  SourceLoc loc = to_loc(l);
  lang::KernelBuilder& kb = lang::current("gemm", loc);
  if (kb.parallel_depth > 0) user_error(loc) << "gemm inside parallel: gemm is a tile op";
  const char* names[] = {"A", "B", "C"};
  const Operand* ops[] = {&a, &b, &c};
  ir::Region r[3];
  for (int i = 0; i < 3; ++i) {
    const ir::Buffer& buf = ops[i]->ref.buffer;
    Scope s = buf->scope;
    bool ok = i < 2 ? (s == Scope::shared || s == Scope::fragment) : s == Scope::fragment;
    if (!ok)
      user_error(loc) << "gemm: operand " << names[i] << " ('" << buf->name << "') is a "
                      << ir::scope_name(s) << (s == Scope::global ? " tensor" : " tile") << "; "
                      << (i < 2 ? "A and B must be shared or fragment tiles"
                                : "C must be a fragment tile (the accumulator)")
                      << (s == Scope::global ? ": copy it into a tile first" : "");
    if (!has_extents(*ops[i])) user_error(loc) << "gemm: operand " << names[i] << " needs extents";
    r[i] = resolve(*ops[i], nullptr, "gemm", loc);
    if (r[i].squeezed().size() != 2 && r[i].extent.size() != 2)
      user_error(loc) << "gemm: operand " << names[i] << " ('" << buf->name
                      << "') must be 2-d, got " << shape_str(r[i].extent);
  }
  DType ta = a.ref.buffer->dtype, tb = b.ref.buffer->dtype, tc = c.ref.buffer->dtype;
  for (DType t : {ta, tb})
    if (t != DType::f16 && t != DType::bf16 && t != DType::f32)
      user_error(loc) << "gemm: dtype " << dtype_name(t)
                      << " is not supported for A and B; use f16, bf16 or f32";
  if (ta != tb)
    user_error(loc) << "gemm: A is " << dtype_name(ta) << " but B is " << dtype_name(tb)
                    << "; convert one with copy() into a tile of the other's dtype";
  if (tc != DType::f32)
    user_error(loc) << "gemm: accumulator C ('" << c.ref.buffer->name << "') is " << dtype_name(tc)
                    << "; gemm accumulates in f32, allocate C as f32";
  auto two = [](const ir::Region& x) {
    std::vector<int64_t> e = x.extent.size() == 2 ? x.extent : x.squeezed();
    return std::pair{e[0], e[1]};
  };
  auto [am, ak] = two(r[0]);
  if (o.trans_a) std::swap(am, ak);
  auto [bk, bn] = two(r[1]);
  if (o.trans_b) std::swap(bk, bn);
  auto [cm, cn] = two(r[2]);
  if (ak != bk || am != cm || bn != cn)
    user_error(loc) << "gemm: shape mismatch: op(A) is [" << am << ", " << ak << "], op(B) is ["
                    << bk << ", " << bn << "], C is [" << cm << ", " << cn
                    << "]; need op(A) [M, K], op(B) [K, N], C [M, N]";
  lang::append(ir::Gemm::make(r[0], r[1], r[2], o.trans_a, o.trans_b, o.clear, loc));
}

void fill(const Operand& dst, const Expr& value, Loc l) {
  SourceLoc loc = to_loc(l);
  lang::KernelBuilder& kb = lang::current("fill", loc);
  if (kb.parallel_depth > 0) user_error(loc) << "fill inside parallel: fill is a tile op";
  if (!has_extents(dst)) user_error(loc) << "fill: the destination box needs extents";
  if (!value.defined()) user_error(loc) << "fill: undefined value";
  lang::append(ir::Fill::make(resolve(dst, nullptr, "fill", loc), value, loc));
}

void clear(const Operand& dst, Loc l) {
  fill(dst, Expr(0.0), l);
}

void reduce(Reduction kind, const Tile& src, const Tile& dst, int dim, bool clear, Loc l) {
  SourceLoc loc = to_loc(l);
  lang::KernelBuilder& kb = lang::current("reduce", loc);
  if (kb.parallel_depth > 0) user_error(loc) << "reduce inside parallel: reduce is a tile op";
  lang::check_owner(src.buffer(), "reduce", loc);
  lang::check_owner(dst.buffer(), "reduce", loc);
  const ir::Buffer& s = src.buffer();
  const ir::Buffer& d = dst.buffer();
  if (s->scope == Scope::global || d->scope == Scope::global)
    user_error(loc) << "reduce: operands must be tiles, not global tensors";
  std::vector<int64_t> ss = s->const_shape();
  if (dim < 0 || dim >= static_cast<int>(ss.size()))
    user_error(loc) << "reduce along a missing dim: '" << s->name << "' is " << ss.size() << "-d "
                    << shape_str(ss) << ", so dim must be in [0, " << ss.size() << "), got " << dim;
  std::vector<int64_t> want = ss;
  want.erase(want.begin() + dim);
  if (want.empty()) want = {1};
  if (d->const_shape() != want)
    user_error(loc) << "reduce: shape mismatch: reducing '" << s->name << "' " << shape_str(ss)
                    << " along dim " << dim << " gives " << shape_str(want) << ", but '" << d->name
                    << "' is " << shape_str(d->const_shape());
  if (!is_float(s->dtype) || !is_float(d->dtype))
    user_error(loc) << "reduce: dtype " << dtype_name(is_float(s->dtype) ? d->dtype : s->dtype)
                    << " is not supported; reduce float tiles (f32, f16, bf16)";
  ir::ReduceOp op = kind == Reduction::max   ? ir::ReduceOp::max
                    : kind == Reduction::min ? ir::ReduceOp::min
                    : kind == Reduction::sum ? ir::ReduceOp::sum
                                             : ir::ReduceOp::absmax;
  lang::append(ir::Reduce::make(op, s, d, dim, clear, loc));
}

void reduce_max(const Tile& src, const Tile& dst, int dim, bool clear, Loc l) {
  reduce(Reduction::max, src, dst, dim, clear, l);
}
void reduce_sum(const Tile& src, const Tile& dst, int dim, bool clear, Loc l) {
  reduce(Reduction::sum, src, dst, dim, clear, l);
}

namespace {

void parallel_n(std::vector<int64_t> extents, size_t arity,
                const std::function<void(const std::vector<Var>&)>& body, Loc l) {
  SourceLoc loc = to_loc(l);
  lang::KernelBuilder& kb = lang::current("parallel", loc);
  if (extents.size() != arity)
    user_error(loc) << "parallel: " << extents.size() << " extents but the body takes " << arity
                    << " index(es)";
  for (int64_t e : extents)
    if (e <= 0) user_error(loc) << "parallel: extents must be positive constants";
  if (kb.parallel_depth > 0)
    user_error(loc) << "parallel inside parallel: give all dimensions to one parallel(...)";
  static const char* names[] = {"i", "j", "l"};
  std::vector<Var> vars;
  for (size_t i = 0; i < arity; ++i)
    vars.push_back(Var(names[i]));
  ++kb.parallel_depth;
  ir::Stmt b;
  try {
    b = lang::scoped([&] { body(vars); });
  } catch (...) {
    --kb.parallel_depth;
    throw;
  }
  --kb.parallel_depth;
  lang::append(ir::Parallel::make(vars, extents, b, loc));
}

void loop(ir::ForKind k, const Expr& begin, const Expr& extent, ir::LoopSchedule schedule,
          const std::function<void(Var)>& body, const char* op, Loc l) {
  const int stages = schedule.stages;
  SourceLoc loc = to_loc(l);
  lang::KernelBuilder& kb = lang::current(op, loc);
  for (const Expr& e : {begin, extent})
    if (!e.defined() || e.dtype() != DType::i32)
      user_error(loc) << op << ": loop bounds must be integer expressions";
  if (k == ir::ForKind::pipelined && (stages < 1 || stages > 8))
    user_error(loc) << "pipelined: stages must be between 1 and 8, got " << stages;
  if (k == ir::ForKind::pipelined && kb.parallel_depth > 0)
    user_error(loc) << "pipelined inside parallel: pipeline tile loops, not element loops";
  Var v(k == ir::ForKind::pipelined ? "ko" : "s");
  ir::Stmt b = lang::scoped([&] { body(v); });
  lang::append(ir::For::make(v, begin, extent, k,
                             k == ir::ForKind::pipelined ? schedule : ir::LoopSchedule{}, b, loc));
}

} // namespace

void parallel(std::vector<int64_t> e, std::function<void(Var)> body, Loc l) {
  parallel_n(
      std::move(e), 1, [&](const std::vector<Var>& v) { body(v[0]); }, l);
}
void parallel(std::vector<int64_t> e, std::function<void(Var, Var)> body, Loc l) {
  parallel_n(
      std::move(e), 2, [&](const std::vector<Var>& v) { body(v[0], v[1]); }, l);
}
void parallel(std::vector<int64_t> e, std::function<void(Var, Var, Var)> body, Loc l) {
  parallel_n(
      std::move(e), 3, [&](const std::vector<Var>& v) { body(v[0], v[1], v[2]); }, l);
}

void pipelined(const Expr& n, int stages, std::function<void(Var)> body, Loc l) {
  loop(ir::ForKind::pipelined, Expr(0), n, {.stages = stages}, body, "pipelined", l);
}
void pipelined(const Expr& n, const Schedule& s, std::function<void(Var)> body, Loc l) {
  ir::LoopSchedule sc;
  sc.stages = s.stages;
  sc.copies = s.copies == Schedule::Copies::tma        ? ir::CopyEngine::tma
              : s.copies == Schedule::Copies::cp_async ? ir::CopyEngine::cp_async
                                                       : ir::CopyEngine::automatic;
  sc.defer_last_gemm = s.defer_last_gemm;
  sc.pingpong = s.pingpong;
  loop(ir::ForKind::pipelined, Expr(0), n, sc, body, "pipelined", l);
}
void serial(const Expr& n, std::function<void(Var)> body, Loc l) {
  loop(ir::ForKind::serial, Expr(0), n, {}, body, "serial", l);
}
void serial(const Expr& begin, const Expr& end, std::function<void(Var)> body, Loc l) {
  loop(ir::ForKind::serial, begin, end - begin, {}, body, "serial", l);
}
void unrolled(int64_t n, std::function<void(Var)> body, Loc l) {
  if (n <= 0) user_error(to_loc(l)) << "unrolled: the trip count must be positive, got " << n;
  loop(ir::ForKind::unrolled, Expr(0), Expr(n), {}, body, "unrolled", l);
}

void if_then_else(const Expr& cond, std::function<void()> then_body,
                  std::function<void()> else_body, Loc l) {
  SourceLoc loc = to_loc(l);
  lang::current("if_then", loc);
  if (!cond.defined()) user_error(loc) << "if_then: undefined condition";
  if (is_float(cond.dtype()))
    user_error(loc) << "if_then: the condition is " << dtype_name(cond.dtype())
                    << "; compare it to get a bool (x > 0)";
  ir::Stmt t = lang::scoped(then_body);
  ir::Stmt e = else_body ? lang::scoped(else_body) : ir::Stmt();
  lang::append(ir::IfThenElse::make(cond, t, e, loc));
}

void if_then(const Expr& cond, std::function<void()> then_body, Loc l) {
  if_then_else(cond, std::move(then_body), nullptr, l);
}

void atomic_add(const ElemRef& dst, const Expr& value, Loc l) {
  SourceLoc loc = to_loc(l);
  lang::current("atomic_add", loc);
  Scope s = dst.buffer->scope;
  if (s != Scope::global && s != Scope::shared)
    user_error(loc) << "atomic_add: destination '" << dst.buffer->name << "' is a "
                    << ir::scope_name(s) << " tile; atomics target global or shared memory";
  if (dst.buffer->dtype != DType::f32 && dst.buffer->dtype != DType::i32 &&
      dst.buffer->dtype != DType::f16 && dst.buffer->dtype != DType::bf16)
    user_error(loc) << "atomic_add: dtype " << dtype_name(dst.buffer->dtype) << " not supported";
  lang::append(ir::AtomicAdd::make(dst.buffer, dst.indices, value, loc));
}

void atomic_add(const Operand& dst, const Tile& src, Loc l) {
  SourceLoc loc = to_loc(l);
  lang::current("atomic_add", loc);
  std::vector<int64_t> se = src.shape();
  ir::Region d = resolve(dst, &se, "atomic_add", loc);
  if (d.squeezed() != ir::whole(src.buffer()).squeezed())
    user_error(loc) << "atomic_add: shape mismatch: destination box " << shape_str(d.extent)
                    << " vs source tile '" << src.buffer()->name << "' " << shape_str(se);
  // Expressed as an element-wise loop: the tile form is sugar.
  std::vector<int64_t> ext = se;
  // Pair the box's non-unit dimensions with the tile's, in order (the copy rule).
  std::vector<int> tile_dims;
  for (size_t k = 0; k < se.size(); ++k)
    if (se[k] != 1) tile_dims.push_back(static_cast<int>(k));
  auto body = [&](const std::vector<Var>& v) {
    std::vector<Expr> di;
    size_t k = 0;
    for (size_t dd = 0; dd < d.extent.size(); ++dd)
      di.push_back(d.extent[dd] == 1 ? d.min[dd] : d.min[dd] + v[tile_dims[k++]]);
    std::vector<Expr> si(v.begin(), v.end());
    // Out-of-bounds elements of the destination are dropped (the copy rule), on every backend:
    // the guard is part of the IR, not of a backend's lowering.
    Expr in;
    for (size_t dd = 0; dd < di.size(); ++dd) {
      Expr c = di[dd] < d.buffer->shape[dd];
      if (!(di[dd].as_int() && *di[dd].as_int() >= 0)) c = di[dd] >= 0 && c;
      in = in.defined() ? (in && c) : c;
    }
    auto add = [&] { atomic_add(ElemRef(d.buffer, di, l), Expr(ElemRef(src.buffer(), si, l)), l); };
    if (in.as_int() && *in.as_int() != 0)
      add(); // in bounds by construction
    else
      if_then(in, add, l);
  };
  parallel_n(ext, ext.size(), body, l);
}

void print(const std::string& label, const Expr& value, Loc l) {
  SourceLoc loc = to_loc(l);
  lang::current("print", loc);
  lang::append(ir::Print::make(label, value, nullptr, loc));
}

void print(const std::string& label, const Tile& tile, Loc l) {
  SourceLoc loc = to_loc(l);
  lang::current("print", loc);
  lang::check_owner(tile.buffer(), "print", loc);
  lang::append(ir::Print::make(label, Expr(), tile.buffer(), loc));
}

} // namespace tp
