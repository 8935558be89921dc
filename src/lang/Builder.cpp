// Kernel construction: opens the builder scope, runs the user's body with block indices,
// collects the symbolic sizes, and verifies the result.
#include "lang/Builder.h"

#include <algorithm>
#include <atomic>
#include <set>
#include <utility>

#include "ir/Verifier.h"
#include "tilepilot/lang.h"

namespace tp::lang {

namespace {
thread_local KernelBuilder* g_current = nullptr;
} // namespace

KernelBuilder* current_or_null() {
  return g_current;
}
void set_current(KernelBuilder* kb) {
  g_current = kb;
}

KernelBuilder& current(const char* op, const SourceLoc& loc) {
  if (!g_current)
    user_error(loc) << op
                    << " called outside a kernel: tile ops are recorded only while the body "
                       "of tp::kernel(...) runs; call it from inside that lambda";
  return *g_current;
}

void append(ir::Stmt s) {
  internal_assert(g_current && !g_current->scopes.empty()) << "no open scope";
  g_current->scopes.back().push_back(std::move(s));
}

SourceLoc to_loc(const std::source_location& l) {
  return SourceLoc{l.file_name(), static_cast<int>(l.line())};
}

namespace {

/// A scope's statements with each `let` (recorded as a Let without a body) given the rest of
/// the scope as its body.
std::vector<ir::Stmt> close_lets(std::vector<ir::Stmt> stmts) {
  std::vector<ir::Stmt> rest;
  for (size_t i = stmts.size(); i-- > 0;) {
    const auto* l = ir::as<ir::Let>(stmts[i]);
    if (!l || l->body.defined()) {
      rest.insert(rest.begin(), stmts[i]);
      continue;
    }
    ir::Stmt body = rest.size() == 1 ? rest[0] : ir::Seq::make(std::move(rest));
    rest = {ir::Let::make(l->var, l->value, body, l->loc)};
  }
  return rest;
}

} // namespace

ir::Stmt scoped(const std::function<void()>& fill) {
  internal_assert(g_current) << "no kernel";
  g_current->scopes.emplace_back();
  fill();
  std::vector<ir::Stmt> stmts = close_lets(std::move(g_current->scopes.back()));
  g_current->scopes.pop_back();
  if (stmts.size() == 1) return stmts[0];
  return ir::Seq::make(std::move(stmts));
}

void check_owner(const ir::Buffer& b, const char* op, const SourceLoc& loc) {
  KernelBuilder& kb = current(op, loc);
  if (b->kernel_uid != 0 && b->kernel_uid != kb.kernel_uid)
    user_error(loc) << op << ": tile '" << b->name << "' (allocated at " << b->loc.str()
                    << ") belongs to another kernel; a tile can only be used inside the kernel "
                       "body that allocated it";
}

} // namespace tp::lang

namespace tp {

using lang::KernelBuilder;

namespace {

template <typename F>
Kernel build_kernel(const std::string& name, const Params& params, Grid g, Threads t,
                    int body_arity, F run_body, KernelOptions opts, Loc sloc) {
  SourceLoc loc = lang::to_loc(sloc);
  if (lang::current_or_null())
    user_error(loc) << "kernel '" << name << "' is built inside the body of kernel '"
                    << lang::current_or_null()->kernel_name << "'; build kernels one at a time";
  if (g.extents.empty() || g.extents.size() > 3)
    user_error(loc) << "kernel '" << name << "': the grid has " << g.extents.size()
                    << " dimensions; give 1 to 3 extents to grid(...)";
  if (static_cast<int>(g.extents.size()) != body_arity)
    user_error(loc) << "kernel '" << name << "': wrong number of block indices: the grid has "
                    << g.extents.size() << " dimension(s) but the body takes " << body_arity
                    << " block index(es); make the lambda take one Var per grid dimension";
  if (t.count <= 0 || t.count > 1024 || t.count % 32 != 0)
    user_error(loc) << "kernel '" << name << "': threads(" << t.count
                    << ") must be a multiple of 32 between 32 and 1024";
  if (opts.blocks_per_sm < 1 || opts.blocks_per_sm > 4)
    user_error(loc) << "kernel '" << name << "': blocks_per_sm = " << opts.blocks_per_sm
                    << " is not 1 to 4; an SM holds at most 4 blocks' share of registers and "
                       "shared memory worth asking for";
  for (const Expr& e : g.extents)
    if (!e.defined() || is_float(e.dtype()))
      user_error(loc) << "kernel '" << name << "': grid extents must be integer expressions";

  auto node = std::make_shared<ir::KernelNode>();
  node->name = name;
  node->threads = t.count;
  node->grid = g.extents;
  node->smem_limit = opts.smem_limit;
  node->blocks_per_sm = opts.blocks_per_sm;
  node->loc = loc;

  KernelBuilder kb;
  static std::atomic<uint64_t> next_kernel{1};
  kb.kernel_uid = next_kernel.fetch_add(1);
  kb.kernel_name = name;
  kb.smem_limit = opts.smem_limit;
  node->uid = kb.kernel_uid;

  std::set<uint64_t> seen_dims;
  std::set<std::string> param_names;
  std::set<uint64_t> seen_scalars;
  bool any_scalar = false;
  for (const Param& p : params.list) {
    if (p.is_scalar()) {
      const auto* v = ir::as<ir::Variable>(p.scalar());
      internal_assert(v) << "scalar parameter is not a variable";
      if (!param_names.insert(v->name).second)
        user_error(loc) << "kernel '" << name << "': two parameters are named '" << v->name
                        << "'; give each parameter a distinct name";
      if (!seen_scalars.insert(v->uid).second)
        user_error(loc) << "kernel '" << name << "': scalar '" << v->name
                        << "' is listed twice among the parameters";
      node->order.push_back({true, static_cast<int>(node->scalars.size())});
      node->scalars.push_back(Var(p.scalar().ptr()));
      any_scalar = true;
      continue;
    }
    const ir::Buffer& b = p.tensor();
    if (!param_names.insert(b->name).second)
      user_error(loc) << "kernel '" << name << "': two parameters are named '" << b->name
                      << "'; give each parameter a distinct name";
    node->order.push_back({false, static_cast<int>(node->params.size())});
    node->params.push_back(b);
    for (const Expr& e : b->shape)
      if (const auto* v = ir::as<ir::Variable>(e); v && seen_dims.insert(v->uid).second)
        node->dims.push_back(Var(e.ptr()));
  }
  for (const Var& d : node->dims)
    if (seen_scalars.count(ir::as<ir::Variable>(d)->uid))
      user_error(loc) << "kernel '" << name << "': scalar '" << d.name()
                      << "' is also a tensor extent; use a Dim for extents";
  if (!any_scalar) node->order.clear(); // the tensors alone, as before scalars existed

  static const char* names[] = {"bx", "by", "bz"};
  for (size_t i = 0; i < g.extents.size(); ++i)
    node->block_vars.push_back(Var(names[i]));

  lang::set_current(&kb);
  try {
    node->body = lang::scoped([&] { run_body(node->block_vars); });
  } catch (...) {
    lang::set_current(nullptr);
    throw;
  }
  lang::set_current(nullptr);
  node->attrs = kb.attrs;
  ir::verify(*node);
  return Kernel(node);
}

} // namespace

Kernel kernel(const std::string& name, Params params, Grid g, Threads t,
              std::function<void(Var)> body, KernelOptions opts, Loc loc) {
  return build_kernel(
      name, params, std::move(g), t, 1, [&](const std::vector<Var>& b) { body(b[0]); }, opts, loc);
}
Kernel kernel(const std::string& name, Params params, Grid g, Threads t,
              std::function<void(Var, Var)> body, KernelOptions opts, Loc loc) {
  return build_kernel(
      name, params, std::move(g), t, 2, [&](const std::vector<Var>& b) { body(b[0], b[1]); }, opts,
      loc);
}
Kernel kernel(const std::string& name, Params params, Grid g, Threads t,
              std::function<void(Var, Var, Var)> body, KernelOptions opts, Loc loc) {
  return build_kernel(
      name, params, std::move(g), t, 3, [&](const std::vector<Var>& b) { body(b[0], b[1], b[2]); },
      opts, loc);
}

Var let(const std::string& name, const Expr& value, Loc l) {
  SourceLoc loc = lang::to_loc(l);
  lang::current("let", loc);
  if (!value.defined()) user_error(loc) << "let '" << name << "': undefined value";
  Var v(name, ir::compute_type(value.dtype()));
  // Recorded without a body; closing the scope gives it the statements after it (scoped()).
  lang::append(ir::Let::make(v, value, ir::Stmt(), loc));
  return v;
}

namespace {

/// The annotations the backends know, each an integer in a range: checked when the kernel is
/// built, so that a typo or a bad value is a user error here, never a silently ignored hint.
struct AnnotationRule {
  const char* key;
  int64_t min, max;
  const char* meaning;
};
constexpr AnnotationRule kAnnotations[] = {
    {"swizzle", 0, 64, "block rasterization panel width (0: row-major)"},
    {"cluster", 1, 2, "blocks per thread-block cluster along grid y (sm_90a TMA multicast)"},
    {"persistent", 0, 1, "1: about one block per SM loops over the grid's tiles"},
    {"paired_stores", 0, 1,
     "1: parallel loops over a gemm accumulator store two adjacent columns at once"},
    {"tma_stores", 0, 1,
     "0: accumulator copies to global store from registers, never through shared memory by TMA "
     "(sm_90a; default 1)"},
    {"shared_swizzle", 0, 1,
     "0: shared tiles stay row-major, never swizzled for their accesses (CUDA; default 1)"},
    {"staged_stores", 0, 1,
     "1: element-wise fragments store to rows that are not 16-byte aligned through a shared "
     "tile, in the destination's aligned 16-byte blocks; 0: directly (CUDA; default 0)"},
    {"row_lanes", 0, 3,
     "which copies of a row's 16-byte runs a warp's lanes make together (an unaligned row as "
     "aligned blocks): 0 none, 1 loads, 2 stores, 3 both (CUDA; default 0)"},
};

/// Loop schedules that were kernel annotations once and are now stated on the loop itself,
/// where they apply: the annotation names where they went.
constexpr std::pair<const char*, const char*> kMovedToSchedule[] = {
    {"pingpong", "pingpong = true"},
    {"overlap", "defer_last_gemm = true"},
};

} // namespace

void annotate(const std::string& key, const std::string& value, Loc loc) {
  const AnnotationRule* rule = nullptr;
  for (const AnnotationRule& r : kAnnotations)
    if (key == r.key) rule = &r;
  for (const auto& [moved, field] : kMovedToSchedule)
    if (key == moved)
      user_error(lang::to_loc(loc))
          << "annotate: '" << key << "' is a loop schedule, not a kernel annotation; state it "
          << "on the loop: pipelined(n, {.stages = 2, ." << field << "}, body)";
  if (!rule) {
    std::string known;
    for (const AnnotationRule& r : kAnnotations)
      known += (known.empty() ? "" : ", ") + std::string(r.key);
    user_error(lang::to_loc(loc)) << "annotate: unknown annotation '" << key
                                  << "'; the annotations are " << known;
  }
  long long v = 0;
  size_t pos = 0;
  bool ok = !value.empty();
  try {
    v = std::stoll(value, &pos);
  } catch (const std::exception&) {
    ok = false;
  }
  if (!ok || pos != value.size() || v < rule->min || v > rule->max)
    user_error(lang::to_loc(loc)) << "annotate: " << key << "=" << value
                                  << " is not an integer in [" << rule->min << ", " << rule->max
                                  << "]; " << key << " is the " << rule->meaning;
  lang::current("annotate", lang::to_loc(loc)).attrs[key] = value;
}

} // namespace tp
