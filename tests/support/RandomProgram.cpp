// The random tile-program generator (see RandomProgram.h). It runs inside a kernel body and
// calls the builder directly, tracking for every live tile its scope, shape, an upper bound on
// the magnitude of its values and whether they are exact integers. The rules that keep a
// program valid and deterministic on both backends:
//  - every tile is fully initialized right after it is allocated;
//  - a parallel loop runs over one tile shape, writes each written tile at exactly (i, j, ..)
//    and reads a tile it writes only there, so iterations are independent;
//  - fragments are indexed by the loop's variables over their whole shape (what a register
//    layout can serve); 1-d fragments appear only in 1-d loops, one per loop;
//  - each block writes only its own box of every output, once, at the top level;
//  - bounds: every value stays below 2^24 in f32 (clamped where it could grow), so sums in any
//    order are exact; inside loops writes to outer tiles are clamped to 64, and a gemm
//    accumulating into an outer tile locks it (unreadable) until the loop ends.
// The file is long (about 1,400 lines) on purpose: these rules interlock across every statement
// kind, and one class in one file lets a reader check each kind against all of them.
#include "RandomProgram.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>

#include "ir/IR.h"
#include "ir/IRPrinter.h"

namespace tp::testing {

bool RandomProgram::uses(const std::string& f) const {
  return std::find(features.begin(), features.end(), f) != features.end();
}

namespace {

using ir::Scope;

constexpr double kLimit = 1 << 20; // largest bound of an expression before it is clamped
constexpr double kOuter = 64;      // clamp of writes to outer tiles inside loops

class Rng {
public:
  explicit Rng(uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in [lo, hi], both inclusive.
  int64_t range(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1));
  }
  bool chance(double p) { return static_cast<double>(next() >> 11) * 0x1.0p-53 < p; }
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(range(0, static_cast<int64_t>(v.size()) - 1))];
  }

private:
  uint64_t s_;
};

struct TileInfo {
  Tile tile;
  Scope scope;
  DType dtype;
  std::vector<int64_t> shape;
  double bound = 0;
  bool exact = true;
  int loop_level = 0;   // loops enclosing the allocation
  int locked_level = 0; // nonzero: accumulated by a gemm of the loop at this level
  bool uninit = true;   // being initialized: not readable yet
  int gemm_c = 0;       // accumulator of: 1 a tensor-core shaped gemm, 2 a plain-loop one
};

struct TensorInfo {
  Tensor tensor;
  ArgSpec spec;
  std::vector<Expr> extent; // as the kernel sees them (Dims or constants)
  bool written = false;     // outputs: stored by this block already
};

/// One expression of a parallel body with what is known about its values.
struct Val {
  Expr e;
  double bound;
  bool exact;
  bool is_int; // i32 (index math), else float
};

double cap_of(DType t) {
  return t == DType::f16 ? 60000 : t == DType::i32 ? 1e9 : 1 << 24;
}

const char* scope_tag(Scope s) {
  return s == Scope::shared ? "shared" : s == Scope::fragment ? "fragment" : "local";
}

class Generator {
public:
  Generator(uint64_t seed, const GenOptions& o, RandomProgram& p) : r_(seed), o_(o), p_(p) {}

  void build();

private:
  // ---- features and bookkeeping -------------------------------------------------------------
  void feature(const std::string& f) {
    if (!p_.uses(f)) p_.features.push_back(f);
  }
  bool outer(const TileInfo& t) const { return t.loop_level < loop_level_; }
  bool readable(const TileInfo& t) const { return t.locked_level == 0 && !t.uninit; }
  bool writable(const TileInfo& t) const { return t.locked_level == 0 && !t.uninit; }

  Expr clamp(const Expr& e, double c) { return tp::min(tp::max(e, Expr(-c)), Expr(c)); }
  Val clamp(Val v, double c) {
    if (v.bound <= c) return v;
    return {clamp(v.is_int ? cast(f32, v.e) : v.e, c), c, v.exact, false};
  }

  DType tile_dtype() {
    int k = static_cast<int>(r_.range(0, 9));
    return k < 4 ? f32 : k < 6 ? bf16 : k < 8 ? f16 : i32;
  }
  Scope tile_scope() {
    int k = static_cast<int>(r_.range(0, 39));
    if (k < 19) return Scope::shared;
    if (k < 38 || !o_.local_tiles) return Scope::fragment;
    return Scope::local;
  }

  /// A tile shape of the program's vocabulary.
  std::vector<int64_t> tile_shape(int rank) {
    if (rank == 1) return {r_.chance(0.5) ? tm_ : tn_};
    if (rank == 3) return {r_.range(2, 3), tm_, tn_};
    if (r_.chance(0.7)) return {tm_, tn_};
    if (r_.chance(0.5)) return {tn_, tm_};
    return {r_.range(1, 9), r_.range(1, 9)};
  }

  // ---- the kernel ---------------------------------------------------------------------------
  void make_tensors();
  void body(const std::vector<Var>& b);
  void stmts(int n, int depth);
  void stmt(int depth);

  // Tiles.
  TileInfo* new_tile(Scope s, DType t, std::vector<int64_t> shape);
  void init_tile(TileInfo& t);
  TileInfo* find_tile(const std::function<bool(const TileInfo&)>& ok);

  // Statements.
  void s_alloc();
  void s_copy_global();
  void s_copy_tiles();
  void s_parallel(TileInfo* dst_hint = nullptr);
  void s_reduce();
  void s_gemm();
  void s_gemm_pipeline();
  void s_fill();
  void s_if(int depth);
  void s_loop(int depth);
  void s_atomic();
  void s_local_store();
  void store_outputs();
  void store_output(TensorInfo& out);

  // Expressions inside a parallel loop over `shape` with variables `vars`.
  Val expr(int depth, bool allow_inexact);
  Val leaf(bool allow_inexact);
  Val index_math();
  Val global_load(bool allow_inexact);
  Expr cond_on_indices();
  Expr block_cond();

  /// Offsets of a tile box of `tensor` near this block's tile (sometimes past the edge).
  std::vector<Expr> box_min(const TensorInfo& g, const std::vector<int64_t>& box);

  Rng r_;
  const GenOptions& o_;
  RandomProgram& p_;
  std::vector<TensorInfo> tensors_;
  std::deque<TileInfo> tiles_; // references stay valid as tiles are added
  double init_cap_ = kLimit;   // bound of values a fresh tile may be initialized with
  bool init_exact_ = false;    // fresh tiles initialized with exact values only
  double acc_bound_ = 3;       // the accumulator tensor's values
  int64_t tm_ = 8, tn_ = 8;
  int threads_ = 128;
  Expr bx_ = Expr(0), by_ = Expr(0), bz_ = Expr(0);
  int64_t blocks_ = 1;
  bool grid3_ = false; // a z dimension: blocks differing only in z share 2-d boxes
  int loop_level_ = 0;
  std::vector<int64_t> trips_; // trip counts of the enclosing loops
  std::vector<Var> loop_vars_;
  // The parallel loop being generated.
  std::vector<int64_t> pshape_;
  std::vector<Var> pvars_;
  std::vector<const TileInfo*> pwritten_;
  bool pfrag_1d_used_ = false;
  // A top-level pipelined gemm over two 16-bit inputs (the warp-specialized TMA path on sm_90a
  // when nothing else writes its staged tiles): input indices, tile sizes, trip count.
  struct Pipe {
    size_t a = 0, b = 0;
    int64_t M = 64, N = 32, K = 16, trips = 1;
    DType t = bf16;
    bool trans_b = false;
  };
  std::optional<Pipe> pipe_;
  int stmt_budget_ = 0;
};

// -------------------------------------------------------------------------------------------
// Tensors and the kernel.

void Generator::make_tensors() {
  int n_in = static_cast<int>(r_.range(0, 2));
  int n_out = r_.chance(0.75) ? 1 : 2;
  bool accum = o_.atomics && r_.chance(0.35);
  static const std::vector<DType> in_types = {f32, f32, bf16, f16, i32};
  static const std::vector<DType> out_types = {f32, f32, f32, bf16, f16, i32};
  int dim_no = 0;
  auto add = [&](ArgSpec::Role role, DType t, std::vector<int64_t> shape) {
    TensorInfo ti{Tensor("x", {Expr(1)}, f32), {}, {}};
    ti.spec.role = role;
    ti.spec.dtype = t;
    ti.spec.shape = shape;
    const char* base = role == ArgSpec::Role::input    ? "in"
                       : role == ArgSpec::Role::output ? "out"
                                                       : "acc";
    ti.spec.name = base + std::to_string(tensors_.size());
    for (int64_t e : shape) {
      if (o_.dims && r_.chance(0.4))
        ti.extent.push_back(Dim("D" + std::to_string(dim_no++)));
      else
        ti.extent.push_back(Expr(e));
    }
    ti.tensor = Tensor(ti.spec.name, ti.extent, t);
    tensors_.push_back(std::move(ti));
  };
  auto extent = [&](int64_t tile) {
    // Odd extents 1..70; about one in five a multiple of the tile.
    int64_t hi = std::min<int64_t>(70, 4 * tile);
    if (r_.chance(0.2) && tile <= hi) return tile * r_.range(1, std::max<int64_t>(1, hi / tile));
    return r_.range(1, hi);
  };
  auto shape_of = [&](int rank) -> std::vector<int64_t> {
    if (rank == 1) return {extent(tm_ * tn_)};
    if (rank == 3) return {r_.range(1, 3), extent(tm_), extent(tn_)};
    return {extent(tm_), extent(tn_)};
  };
  auto rank = [&] { return o_.rank3 && r_.chance(0.15) ? 3 : r_.chance(0.15) ? 1 : 2; };
  // Output 0 is 2-d: it sets the grid.
  for (int k = 0; k < n_out; ++k)
    add(ArgSpec::Role::output, r_.pick(out_types), shape_of(k == 0 ? 2 : rank()));
  for (int k = 0; k < n_in; ++k)
    add(ArgSpec::Role::input, r_.pick(in_types), shape_of(rank()));
  if (accum) add(ArgSpec::Role::accum, f32, shape_of(r_.chance(0.8) ? 2 : 1));
  if (o_.gemm && o_.pipelined && r_.chance(0.25)) {
    static const std::vector<int64_t> ms = {64, 64, 128}, ns = {16, 32, 64}, ks = {16, 32, 64};
    Pipe q;
    q.M = tm_ >= 16 && tm_ <= 128 && r_.chance(0.5) ? tm_ : r_.pick(ms);
    q.N = tn_ >= 16 && tn_ <= 64 && r_.chance(0.5) ? tn_ : r_.pick(ns);
    if (o_.narrow_wgmma_b && r_.chance(0.1)) q.N = 8;
    q.K = r_.pick(ks);
    q.t = r_.chance(0.6) ? bf16 : f16;
    q.trans_b = r_.chance(0.3);
    // K: odd, or a multiple of 8 elements so that rows are 16-byte aligned for TMA.
    int64_t k = r_.chance(0.5) ? 8 * r_.range(1, 8) : r_.range(1, 70);
    q.trips = (k + q.K - 1) / q.K;
    q.a = tensors_.size();
    add(ArgSpec::Role::input, q.t, {r_.range(1, 70), k});
    q.b = tensors_.size();
    int64_t n = r_.chance(0.5) ? 8 * r_.range(1, 8) : r_.range(1, 70);
    add(ArgSpec::Role::input, q.t,
        q.trans_b ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n});
    pipe_ = q;
  }
  if (o_.rank5 && r_.chance(0.05)) {
    add(ArgSpec::Role::input, f32, {2, 1, 3, 2, 5});
    feature("rank5");
  }
}

void Generator::build() {
  static const std::vector<int64_t> dims = {1, 2, 3, 4, 5, 7, 8, 13, 16, 16, 32, 32, 64};
  tm_ = r_.pick(dims);
  tn_ = r_.pick(dims);
  while (tm_ * tn_ > 2048)
    tn_ /= 2;
  static const std::vector<int> thread_counts = {32, 64, 128, 128, 128, 256};
  threads_ = r_.pick(thread_counts);
  make_tensors();
  const TensorInfo& o0 = tensors_[0];
  Expr gx = ceildiv(o0.extent[1], Expr(tn_)), gy = ceildiv(o0.extent[0], Expr(tm_));
  blocks_ = ((o0.spec.shape[1] + tn_ - 1) / tn_) * ((o0.spec.shape[0] + tm_ - 1) / tm_);
  std::vector<Tensor> params;
  for (const TensorInfo& t : tensors_)
    params.push_back(t.tensor);
  std::string name = "rand" + std::to_string(p_.seed);
  int grid_rank = r_.chance(0.15) ? 3 : 2;
  if (grid_rank == 3) {
    grid3_ = true;
    int64_t gz = r_.range(1, 2);
    blocks_ *= gz;
    p_.kernel =
        kernel(name, params, grid(gx, gy, Expr(gz)), threads(threads_), [&](Var x, Var y, Var z) {
          body({x, y, z});
        });
  } else {
    p_.kernel = kernel(name, params, grid(gx, gy), threads(threads_), [&](Var x, Var y) {
      body({x, y});
    });
  }
  for (const TensorInfo& t : tensors_)
    p_.args.push_back(t.spec);
}

void Generator::body(const std::vector<Var>& b) {
  bx_ = b[0];
  by_ = b[1];
  if (b.size() > 2) bz_ = b[2];
  stmt_budget_ = 3 * o_.max_stmts;
  int n = static_cast<int>(r_.range(1, o_.max_stmts));
  if (pipe_) {
    int at = static_cast<int>(r_.range(0, n - 1));
    stmts(at, 0);
    s_gemm_pipeline();
    stmts(n - at - 1, 0);
  } else {
    stmts(n, 0);
  }
  store_outputs();
}

void Generator::stmts(int n, int depth) {
  for (int k = 0; k < n && stmt_budget_ > 0; ++k) {
    --stmt_budget_;
    stmt(depth);
  }
}

void Generator::stmt(int depth) {
  for (;;) {
    int k = static_cast<int>(r_.range(0, 13));
    switch (k) {
    case 0:
      return s_alloc();
    case 1:
      return s_copy_global();
    case 2:
      return s_copy_tiles();
    case 3:
    case 4:
      return s_parallel();
    case 5:
      if (!o_.reduce) continue;
      return s_reduce();
    case 6:
    case 7:
      if (!o_.gemm) continue;
      return s_gemm();
    case 8:
      return s_fill();
    case 9:
      if (!o_.conditionals || depth >= o_.max_depth) continue;
      return s_if(depth);
    case 10:
    case 11:
      if (!o_.loops || depth >= o_.max_depth) continue;
      return s_loop(depth);
    case 12:
      if (!o_.atomics) continue;
      return s_atomic();
    case 13:
      if (!o_.local_tiles || r_.chance(0.6)) continue;
      return s_local_store();
    }
  }
}

// -------------------------------------------------------------------------------------------
// Tiles.

TileInfo* Generator::new_tile(Scope s, DType t, std::vector<int64_t> shape) {
  if (s == Scope::local && !o_.local_tiles) s = Scope::fragment;
  Tile tile = s == Scope::shared     ? alloc_shared(shape, t)
              : s == Scope::fragment ? alloc_fragment(shape, t)
                                     : alloc_local(shape, t);
  feature(scope_tag(s));
  if (shape.size() == 3) feature("tile3d");
  tiles_.push_back(TileInfo{tile, s, t, shape, 0, true, loop_level_, 0, true});
  TileInfo& ti = tiles_.back();
  init_tile(ti);
  ti.uninit = false;
  return &ti;
}

/// Every element of a fresh tile gets a value: a fill, a copy of a global box, or a parallel
/// loop of index math.
void Generator::init_tile(TileInfo& t) {
  int k = static_cast<int>(r_.range(0, 2));
  std::vector<const TensorInfo*> srcs;
  for (const TensorInfo& g : tensors_)
    if (g.spec.role == ArgSpec::Role::input && g.spec.shape.size() == t.shape.size())
      srcs.push_back(&g);
  if (t.scope == Scope::local) k = 0; // local tiles: fill, then element stores
  if (k == 1 && !srcs.empty()) {
    const TensorInfo& g = *r_.pick(srcs);
    copy(g.tensor.tile(box_min(g, t.shape)), t.tile);
    t.bound = 4;
    feature("copy_global_to_" + std::string(scope_tag(t.scope)));
    return;
  }
  if (k == 2) return s_parallel(&t);
  double v = static_cast<double>(r_.range(-3, 3));
  if (r_.chance(0.3)) {
    clear(t.tile);
    v = 0;
  } else {
    fill(t.tile, t.dtype == i32 ? Expr(static_cast<int>(v)) : Expr(v));
  }
  t.bound = std::abs(v);
}

TileInfo* Generator::find_tile(const std::function<bool(const TileInfo&)>& ok) {
  std::vector<size_t> c;
  for (size_t i = 0; i < tiles_.size(); ++i)
    if (ok(tiles_[i])) c.push_back(i);
  if (c.empty()) return nullptr;
  return &tiles_[r_.pick(c)];
}

void Generator::s_alloc() {
  int rank = o_.rank3 && r_.chance(0.1) ? 3 : r_.chance(0.2) ? 1 : 2;
  new_tile(tile_scope(), tile_dtype(), tile_shape(rank));
}

std::vector<Expr> Generator::box_min(const TensorInfo& g, const std::vector<int64_t>& box) {
  std::vector<Expr> m;
  size_t r = box.size();
  auto jitter = [&](int64_t ext) -> Expr {
    int k = static_cast<int>(r_.range(0, 9));
    if (k < 6) return Expr(0);
    if (k < 8) return Expr(r_.range(1, std::max<int64_t>(1, ext / 2)));
    if (k < 9) return Expr(-r_.range(1, std::max<int64_t>(1, ext / 2))); // before the start
    return Expr(r_.range(ext, 2 * ext));                                 // past the edge
  };
  Expr k = loop_vars_.empty() ? Expr(0) : Expr(loop_vars_.back());
  bool use_k = !loop_vars_.empty() && r_.chance(0.7);
  for (size_t d = 0; d < r; ++d) {
    Expr base(0);
    if (d + 2 == r) base = by_ * box[d];
    if (d + 1 == r) base = use_k ? k * box[d] : bx_ * box[d];
    if (r == 1) base = (by_ * 3 + bx_ + (use_k ? k : Expr(0))) * box[d];
    if (r == 3 && d == 0) base = r_.chance(0.5) ? bz_ : Expr(0);
    m.push_back(base + jitter(box[d]));
  }
  (void)g;
  return m;
}

// -------------------------------------------------------------------------------------------
// Copies.

void Generator::s_copy_global() {
  std::vector<const TensorInfo*> srcs;
  for (const TensorInfo& g : tensors_)
    if (g.spec.role == ArgSpec::Role::input && g.spec.shape.size() <= 3) srcs.push_back(&g);
  if (srcs.empty()) return s_alloc();
  const TensorInfo& g = *r_.pick(srcs);
  int rank = static_cast<int>(g.spec.shape.size());
  // The tile: of the tensor's rank, or a 2-d tile from a [1, a, b] box of a 3-d tensor.
  int trank = rank == 3 && r_.chance(0.5) ? 2 : rank;
  TileInfo* t = find_tile([&](const TileInfo& x) {
    return static_cast<int>(x.shape.size()) == trank && writable(x) && x.scope != Scope::local &&
           (!outer(x) || 4 <= kOuter);
  });
  if (!t || r_.chance(0.3)) {
    t = new_tile(tile_scope() == Scope::local ? Scope::shared : tile_scope(), tile_dtype(),
                 tile_shape(trank));
    if (t->scope == Scope::local) return;
  }
  std::vector<int64_t> box = t->shape;
  if (trank < rank) box.insert(box.begin(), 1);
  bool region = o_.regions && r_.chance(0.3) && (t->scope != Scope::fragment || o_.frag_regions);
  if (region) {
    // A sub-box of the tile, read from the same-shaped box of the tensor.
    std::vector<Expr> tmin;
    std::vector<int64_t> ext;
    for (int64_t e : t->shape) {
      int64_t x = r_.range(1, e), m0 = r_.range(0, e - x);
      ext.push_back(x);
      tmin.push_back(Expr(m0));
    }
    std::vector<int64_t> gbox = ext;
    if (trank < rank) gbox.insert(gbox.begin(), 1);
    copy(g.tensor.tile(box_min(g, gbox), gbox), t->tile.region(tmin, ext));
    feature("copy_global_region");
  } else if (r_.chance(0.5)) {
    copy(g.tensor.tile(box_min(g, box), box), t->tile);
  } else {
    copy(g.tensor.tile(box_min(g, box)), t->tile);
  }
  feature("copy_global_to_" + std::string(scope_tag(t->scope)));
  t->bound = std::max(t->bound, 4.0);
}

void Generator::s_copy_tiles() {
  TileInfo* s =
      find_tile([&](const TileInfo& x) { return readable(x) && x.scope != Scope::local; });
  if (!s) return s_alloc();
  bool region = o_.regions && r_.chance(0.35) && (s->scope != Scope::fragment || o_.frag_regions);
  TileInfo* d = find_tile([&](const TileInfo& x) {
    if (region && x.scope == Scope::fragment && !o_.frag_regions) return false;
    bool shape_ok = region ? x.shape.size() == s->shape.size() : x.shape == s->shape;
    return &x != s && shape_ok && writable(x) && x.scope != Scope::local &&
           s->bound <= cap_of(x.dtype) && (x.dtype != i32 || s->exact) &&
           (!outer(x) || (s->bound <= kOuter && s->exact));
  });
  if (!d) {
    if (loop_level_ > 0 && s->bound > kOuter) return;
    Scope sc = tile_scope();
    if (sc == Scope::local || (region && !o_.frag_regions)) sc = Scope::shared;
    DType t = tile_dtype();
    if (s->bound > cap_of(t) || (t == i32 && !s->exact)) t = f32;
    d = new_tile(sc, t, s->shape);
  }
  if (region) {
    std::vector<Expr> smin, dmin;
    std::vector<int64_t> ext;
    for (size_t k = 0; k < s->shape.size(); ++k) {
      int64_t x = r_.range(1, std::min(s->shape[k], d->shape[k]));
      ext.push_back(x);
      smin.push_back(Expr(r_.range(0, s->shape[k] - x)));
      dmin.push_back(Expr(r_.range(0, d->shape[k] - x)));
    }
    copy(s->tile.region(smin, ext), d->tile.region(dmin, ext));
    feature("copy_region_" + std::string(scope_tag(s->scope)) + "_to_" + scope_tag(d->scope));
  } else {
    copy(s->tile, d->tile);
    feature("copy_" + std::string(scope_tag(s->scope)) + "_to_" + scope_tag(d->scope));
  }
  d->bound = std::max(d->bound, s->bound);
  d->exact = d->exact && s->exact;
  if (s->dtype != d->dtype) feature("copy_convert");
}

// -------------------------------------------------------------------------------------------
// Parallel loops and their expressions.

Val Generator::index_math() {
  // Integer math on the loop's and the block's indices, small and exact.
  Expr e = pvars_.empty() ? Expr(0) : Expr(r_.pick(pvars_));
  int64_t b = pshape_.empty() ? 1 : *std::max_element(pshape_.begin(), pshape_.end());
  double bound = static_cast<double>(b);
  int k = static_cast<int>(r_.range(0, 5));
  if (k == 0 && pvars_.size() > 1) {
    e = e * Expr(static_cast<int>(r_.range(1, 3))) + Expr(pvars_.back());
    bound = bound * 4;
  } else if (k == 1) {
    int64_t m = r_.range(2, 7);
    e = (e + bx_) % Expr(m) - Expr(m / 2);
    bound = static_cast<double>(m);
  } else if (k == 2) {
    e = e / Expr(static_cast<int>(r_.range(1, 4))) - by_;
    bound = bound + 8;
  } else if (k == 3 && !loop_vars_.empty()) {
    e = e + Expr(loop_vars_.back());
    bound = bound + 8;
  } else if (k == 4) {
    e = Expr(static_cast<int>(r_.range(-5, 5))) - e;
    bound = bound + 5;
  }
  return {e, bound, true, true};
}

/// An element of an input tensor near the loop element, always in bounds: by clamped indices,
/// by a select guard (issue 14 (c): the interpreter evaluates both sides) or by clamping.
Val Generator::global_load(bool allow_inexact) {
  std::vector<const TensorInfo*> srcs;
  for (const TensorInfo& g : tensors_)
    if (g.spec.role == ArgSpec::Role::input) srcs.push_back(&g);
  if (srcs.empty()) return index_math();
  const TensorInfo& g = *r_.pick(srcs);
  size_t rank = g.spec.shape.size();
  std::vector<Expr> idx;
  Expr in_bounds;
  bool guarded = o_.select && o_.guarded_select_loads && r_.chance(0.3);
  for (size_t d = 0; d < rank; ++d) {
    Expr v = pvars_.empty() ? Expr(0) : Expr(pvars_[std::min(d, pvars_.size() - 1)]);
    Expr base = d + 1 == rank ? bx_ * pshape_.back() : d + 2 == rank ? by_ * pshape_[0] : Expr(0);
    Expr raw = base + v + Expr(static_cast<int>(r_.range(-1, 2)));
    if (guarded) {
      Expr ok = raw >= Expr(0) && raw < g.extent[d];
      in_bounds = in_bounds.defined() ? (in_bounds && ok) : ok;
      idx.push_back(raw);
    } else {
      idx.push_back(tp::min(tp::max(raw, Expr(0)), g.extent[d] - Expr(1)));
    }
  }
  Expr e = g.tensor.elem(idx);
  bool is_int = g.spec.dtype == i32;
  if (guarded) {
    e = select(in_bounds, e, is_int ? Expr(0) : Expr(0.0));
    feature("guarded_select_load");
  }
  feature(rank == 5 ? "load_rank5" : "global_load");
  (void)allow_inexact;
  return {e, 4, true, is_int};
}

Val Generator::leaf(bool allow_inexact) {
  for (int tries = 0; tries < 4; ++tries) {
    int k = static_cast<int>(r_.range(0, 9));
    if (k <= 1) return index_math();
    if (k == 2) {
      int v = static_cast<int>(r_.range(-3, 3));
      return r_.chance(0.5) ? Val{Expr(static_cast<double>(v)), std::abs(v) * 1.0, true, false}
                            : Val{Expr(v), std::abs(v) * 1.0, true, true};
    }
    if (k == 3) return global_load(allow_inexact);
    // A tile of the loop's shape at (i, j, ..): any scope but local.
    if (k <= 6) {
      TileInfo* t = find_tile([&](const TileInfo& x) {
        return x.shape == pshape_ && readable(x) && x.scope != Scope::local &&
               (allow_inexact || x.exact) && !(x.scope == Scope::fragment && x.shape.size() == 1);
      });
      if (!t) continue;
      std::vector<Expr> idx(pvars_.begin(), pvars_.end());
      Val v{t->tile.elem(idx), t->bound, t->exact, t->dtype == i32};
      return v.bound > 4096 ? clamp(v, 64) : v;
    }
    if (k == 7) {
      // A shared tile read elsewhere than (i, j): transposed, shifted or a row/column vector.
      TileInfo* t = find_tile([&](const TileInfo& x) {
        if (x.scope != Scope::shared || !readable(x) || (!allow_inexact && !x.exact)) return false;
        for (const TileInfo* w : pwritten_)
          if (w == &x) return false;
        if (x.shape.size() == 1) return true;
        return x.shape.size() == 2 && pshape_.size() == 2 && x.shape[0] == pshape_[1] &&
               x.shape[1] == pshape_[0];
      });
      if (!t) continue;
      std::vector<Expr> idx;
      if (t->shape.size() == 1) {
        Expr v = pvars_[static_cast<size_t>(r_.range(0, static_cast<int64_t>(pvars_.size()) - 1))];
        idx.push_back((v + Expr(static_cast<int>(r_.range(0, 3)))) % Expr(t->shape[0]));
      } else {
        idx = {pvars_[1], pvars_[0]};
      }
      feature("shared_gather");
      Val v{t->tile.elem(idx), t->bound, t->exact, t->dtype == i32};
      return v.bound > 4096 ? clamp(v, 64) : v;
    }
    if (k == 8) {
      // A local tile: the same in every thread, readable at any index.
      TileInfo* t = find_tile([&](const TileInfo& x) {
        return x.scope == Scope::local && readable(x) && x.shape.size() == 1 &&
               (allow_inexact || x.exact);
      });
      if (!t) continue;
      Expr i = Expr(pvars_[0]) % Expr(t->shape[0]);
      feature("local_read");
      return {t->tile(i), t->bound, t->exact, t->dtype == i32};
    }
    if (k == 9) {
      // A 1-d fragment in a 1-d loop: the loop's only 1-d fragment.
      if (pshape_.size() != 1 || pfrag_1d_used_) continue;
      TileInfo* t = find_tile([&](const TileInfo& x) {
        return x.scope == Scope::fragment && x.shape == pshape_ && readable(x) &&
               (allow_inexact || x.exact);
      });
      if (!t) continue;
      pfrag_1d_used_ = true;
      return {t->tile(pvars_[0]), t->bound, t->exact, t->dtype == i32};
    }
  }
  return index_math();
}

Expr Generator::cond_on_indices() {
  Expr v = Expr(r_.pick(pvars_));
  int k = static_cast<int>(r_.range(0, 3));
  if (k == 0) return v < Expr(static_cast<int>(r_.range(0, 8)));
  if (k == 1) return (v + bx_) % Expr(2) == Expr(0);
  if (k == 2) return v >= by_ && v != Expr(static_cast<int>(r_.range(0, 4)));
  return !(v > Expr(static_cast<int>(r_.range(1, 6))));
}

Val Generator::expr(int depth, bool allow_inexact) {
  if (depth <= 0 || r_.chance(0.25)) return leaf(allow_inexact);
  int k = static_cast<int>(r_.range(0, 11));
  auto as_float = [](Val v) {
    if (v.is_int) v.e = cast(f32, v.e), v.is_int = false;
    return v;
  };
  auto fit = [&](Val v) { return v.bound > kLimit ? clamp(v, 64) : v; };
  if (k <= 4) {
    Val a = expr(depth - 1, allow_inexact), b = expr(depth - 1, allow_inexact);
    bool ints = a.is_int && b.is_int;
    if (!ints) a = as_float(a), b = as_float(b);
    Val out{Expr(), 0, a.exact && b.exact, ints};
    switch (k) {
    case 0:
      out.e = a.e + b.e, out.bound = a.bound + b.bound;
      break;
    case 1:
      out.e = a.e - b.e, out.bound = a.bound + b.bound;
      break;
    case 2:
      if (a.bound * b.bound > kLimit) a = clamp(a, 64), b = clamp(b, 64);
      out.e = a.e * b.e, out.bound = a.bound * b.bound;
      out.is_int = a.is_int && b.is_int;
      break;
    case 3:
      out.e = tp::min(a.e, b.e), out.bound = std::max(a.bound, b.bound);
      break;
    case 4:
      out.e = tp::max(a.e, b.e), out.bound = std::max(a.bound, b.bound);
      break;
    }
    return fit(out);
  }
  if (k == 5) {
    Val a = expr(depth - 1, allow_inexact);
    return {r_.chance(0.5) ? tp::abs(a.e) : -a.e, a.bound, a.exact, a.is_int};
  }
  if (k == 6 && o_.exp2 && allow_inexact) {
    Val a = as_float(expr(depth - 1, false));
    feature("exp2");
    p_.atol = 1.0 / 64, p_.rtol = 1.0 / 64;
    return {tp::exp2(clamp(a.e, 4)), 16, false, false};
  }
  if (k == 7 && o_.casts) {
    // Through a narrower float type (exact for small integers) or to an integer.
    Val a = expr(depth - 1, allow_inexact);
    int c = static_cast<int>(r_.range(0, 2));
    if (c == 2 && a.exact && !a.is_int) {
      feature("cast_i32");
      return {cast(i32, a.e), a.bound, true, true};
    }
    DType t = c == 0 ? f16 : bf16;
    if (a.bound > cap_of(t)) a = clamp(a, 64);
    feature(std::string("cast_") + dtype_name(t));
    return {cast(f32, cast(t, a.e)), a.bound, a.exact, false};
  }
  if (k >= 8 && o_.select) {
    Val a = expr(depth - 1, allow_inexact), b = expr(depth - 1, allow_inexact);
    if (a.is_int != b.is_int) a = as_float(a), b = as_float(b);
    Expr c;
    if (k == 8 || !a.exact || !b.exact) {
      c = cond_on_indices();
    } else {
      c = r_.chance(0.5) ? a.e < b.e : a.e == b.e; // exact data, so a comparison is robust
      feature("select_on_data");
    }
    feature("select");
    return {select(c, a.e, b.e), std::max(a.bound, b.bound), a.exact && b.exact, a.is_int};
  }
  return leaf(allow_inexact);
}

/// A parallel loop over a tile shape writing 1-2 tiles of that shape (`dst` first when given:
/// a fresh tile, then written everywhere unconditionally).
void Generator::s_parallel(TileInfo* dst) {
  bool first_init = dst != nullptr;
  if (!dst) {
    dst = find_tile([&](const TileInfo& x) { return writable(x) && x.scope != Scope::local; });
    if (!dst) return s_alloc();
  }
  std::vector<int64_t> shape = dst->shape;
  std::vector<TileInfo*> targets = {dst};
  if (r_.chance(0.3)) {
    TileInfo* t2 = find_tile([&](const TileInfo& x) {
      return &x != dst && x.shape == shape && writable(x) && x.scope != Scope::local &&
             (x.scope != Scope::fragment || shape.size() != 1);
    });
    if (t2) targets.push_back(t2);
  }
  std::vector<Val> vals(targets.size());
  auto body = [&](const std::vector<Var>& v) {
    pshape_ = shape;
    pvars_ = v;
    pwritten_.assign(targets.begin(), targets.end());
    for (size_t n = 0; n < targets.size(); ++n) {
      TileInfo& t = *targets[n];
      bool fresh = n == 0 && first_init;
      bool in_loop_outer = outer(t);
      bool allow_inexact = t.dtype != i32 && !in_loop_outer && !(fresh && init_exact_);
      Val e = expr(static_cast<int>(r_.range(0, 3)), allow_inexact);
      if (in_loop_outer) e = clamp(e, kOuter);
      if (fresh && e.bound > init_cap_) e = clamp(e, init_cap_);
      if (e.bound > cap_of(t.dtype)) e = clamp(e, 64);
      if (t.dtype == i32 && !e.is_int) e = {cast(i32, e.e), e.bound, e.exact, true};
      vals[n] = e;
      std::vector<Expr> idx(v.begin(), v.end());
      double cap = std::min(cap_of(t.dtype), kLimit);
      if (!fresh && o_.conditionals && r_.chance(0.2)) {
        Expr c = cond_on_indices();
        if_then(c, [&] { t.tile.elem(idx) = e.e; });
        feature("if_in_parallel");
      } else if (!fresh && !in_loop_outer && e.bound + t.bound <= cap && r_.chance(0.15)) {
        t.tile.elem(idx) += e.e; // read-modify-write of the same element
        vals[n].bound = e.bound + t.bound;
        vals[n].exact = e.exact && t.exact;
      } else {
        t.tile.elem(idx) = e.e;
      }
    }
  };
  pfrag_1d_used_ = false;
  if (shape.size() == 1)
    for (TileInfo* t : targets)
      if (t->scope == Scope::fragment) pfrag_1d_used_ = true; // the loop's one 1-d fragment
  if (shape.size() == 1) parallel(shape, [&](Var i) { body({i}); });
  if (shape.size() == 2) parallel(shape, [&](Var i, Var j) { body({i, j}); });
  if (shape.size() == 3) parallel(shape, [&](Var i, Var j, Var l) { body({i, j, l}); });
  pshape_.clear();
  pvars_.clear();
  pwritten_.clear();
  for (size_t n = 0; n < targets.size(); ++n) {
    TileInfo& t = *targets[n];
    t.bound = first_init && n == 0 ? vals[n].bound : std::max(t.bound, vals[n].bound);
    t.exact = (first_init && n == 0 ? true : t.exact) && vals[n].exact;
  }
  feature("parallel_" + std::to_string(shape.size()) + "d");
}

// -------------------------------------------------------------------------------------------
// Reduce, gemm, fill.

void Generator::s_reduce() {
  TileInfo* s = find_tile([&](const TileInfo& x) {
    if (!readable(x) || !is_float(x.dtype) || x.scope == Scope::local) return false;
    // 1-d and 3-d fragments, and 2-d ones reduced along dim 0, would need a shared source
    // when they live in registers.
    return x.scope == Scope::shared || x.shape.size() == 2;
  });
  if (!s) return s_alloc();
  int rank = static_cast<int>(s->shape.size());
  int dim = s->scope == Scope::fragment ? 1 : static_cast<int>(r_.range(0, rank - 1));
  std::vector<int64_t> want = s->shape;
  want.erase(want.begin() + dim);
  if (want.empty()) want = {1};
  static const std::vector<Reduction> kinds = {Reduction::max, Reduction::min, Reduction::sum,
                                               Reduction::absmax};
  Reduction kind = r_.pick(kinds);
  double n = static_cast<double>(s->shape[static_cast<size_t>(dim)]);
  double b = kind == Reduction::sum ? n * s->bound : s->bound;
  if (b > kLimit) kind = Reduction::max, b = s->bound;
  TileInfo* d = nullptr;
  bool clear_dst = true;
  if (r_.chance(0.3)) {
    d = find_tile([&](const TileInfo& x) {
      return &x != s && x.shape == want && x.scope == Scope::shared && writable(x) &&
             is_float(x.dtype) && b <= cap_of(x.dtype) && (!outer(x) || (b <= kOuter && s->exact));
    });
    if (d) clear_dst = r_.chance(0.5) && !(outer(*d) && kind == Reduction::sum);
  }
  if (!d) {
    if (loop_level_ > 0 && b > kOuter && r_.chance(0.0)) return;
    Scope sc = r_.chance(0.5) ? Scope::shared : Scope::fragment;
    DType t = r_.chance(0.7) ? f32 : (b <= cap_of(bf16) ? bf16 : f32);
    d = new_tile(sc, t, want);
  }
  double before = d->bound;
  reduce(kind, s->tile, d->tile, dim, clear_dst);
  double after = clear_dst ? b : (kind == Reduction::sum ? before + b : std::max(before, b));
  d->bound = std::max(before, after);
  d->exact = d->exact && s->exact;
  feature(std::string("reduce_") +
          (kind == Reduction::max   ? "max"
           : kind == Reduction::min ? "min"
           : kind == Reduction::sum ? "sum"
                                    : "absmax") +
          "_" + scope_tag(s->scope));
}

void Generator::s_gemm() {
  // Tensor-core friendly shapes most of the time; odd ones take the plain loop.
  static const std::vector<int64_t> ms = {16, 32, 64, 64, 128}, ns = {8, 16, 32, 64},
                                    ks = {16, 32, 64};
  int64_t M = r_.chance(0.5) && tm_ >= 16 ? tm_ : r_.pick(ms);
  int64_t N = r_.chance(0.5) && tn_ >= 8 && tn_ <= 64 ? tn_ : r_.pick(ns);
  int64_t K = r_.pick(ks);
  if (r_.chance(0.15)) M = r_.range(1, 9), N = r_.range(1, 9), K = r_.range(1, 20);
  if (M * K > 4096) K = 16;
  DType t = r_.chance(0.45) ? bf16 : r_.chance(0.8) ? f16 : f32;
  if (!o_.narrow_wgmma_b && N == 8 && t != f32) N = 16;
  bool ta = r_.chance(0.25), tb = r_.chance(0.3);
  // Operand scopes: a gemm that runs as a plain loop (f32, odd shapes, B in a fragment, A in a
  // transposed fragment) needs every operand outside registers, so it takes shared operands and
  // an accumulator that no tensor-core gemm shares.
  bool plain = t == f32 || M % 16 != 0 || N % 8 != 0 || K % 16 != 0;
  bool b_frag = r_.chance(0.1), a_frag = !plain && !b_frag && r_.chance(0.3);
  if (b_frag) plain = true;
  if (a_frag) ta = false;
  std::vector<int64_t> ashape = ta ? std::vector<int64_t>{K, M} : std::vector<int64_t>{M, K};
  std::vector<int64_t> bshape = tb ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N};
  auto operand = [&](const std::vector<int64_t>& shape, bool a) -> TileInfo* {
    Scope sc = (a ? a_frag : b_frag) ? Scope::fragment : Scope::shared;
    TileInfo* x = find_tile([&](const TileInfo& y) {
      return y.shape == shape && y.dtype == t && readable(y) && y.bound <= 64 && y.exact &&
             y.scope == sc && (sc == Scope::shared || y.gemm_c == 0);
    });
    if (x && r_.chance(0.7)) return x;
    double cap = init_cap_;
    bool exact = init_exact_;
    init_cap_ = 64, init_exact_ = true;
    TileInfo* fresh = new_tile(sc, t, shape);
    init_cap_ = cap, init_exact_ = exact;
    return fresh;
  };
  TileInfo* A = operand(ashape, true);
  TileInfo* B = operand(bshape, false);
  if (A->bound > 64 || B->bound > 64 || !A->exact || !B->exact) return; // fresh ones are fine
  std::vector<int64_t> cshape = {M, N};
  TileInfo* C = find_tile([&](const TileInfo& y) {
    return y.shape == cshape && y.dtype == f32 && y.scope == Scope::fragment && writable(y) &&
           y.exact && &y != A && &y != B && y.gemm_c == (plain ? 2 : 1);
  });
  if (!C || r_.chance(0.4)) C = new_tile(Scope::fragment, f32, cshape);
  C->gemm_c = plain ? 2 : 1;
  bool clear_c = r_.chance(0.3);
  double mult = 1;
  if (outer(*C)) {
    for (size_t l = static_cast<size_t>(C->loop_level); l < trips_.size(); ++l)
      mult *= static_cast<double>(trips_[l]);
    if (clear_c && r_.chance(0.5)) clear_c = false;
  }
  double add = static_cast<double>(K) * A->bound * B->bound;
  double nb = clear_c && !outer(*C) ? add : C->bound + mult * add;
  if (nb > 1 << 23) return;
  GemmOptions go;
  go.trans_a = ta, go.trans_b = tb, go.clear = clear_c;
  bool region = o_.regions && r_.chance(0.1);
  if (region) {
    gemm(A->tile.region({Expr(0), Expr(0)}, A->shape), B->tile.region({Expr(0), Expr(0)}, B->shape),
         C->tile.region({Expr(0), Expr(0)}, C->shape), go);
    feature("gemm_region");
  } else {
    gemm(A->tile, B->tile, C->tile, go);
  }
  C->bound = clear_c && outer(*C) ? std::max(C->bound, nb) : nb;
  if (outer(*C)) C->locked_level = C->loop_level + 1;
  feature(std::string("gemm_") + dtype_name(t) + "_" + scope_tag(A->scope) + "_" +
          scope_tag(B->scope));
}

/// C += A(by, k) * B(k, bx) over the K extent of two 16-bit inputs, in a pipelined loop at the
/// top level: its copies feed shared tiles (allocated before the loop or in it) that nothing
/// else writes, so sm_90a lowers it warp-specialized with TMA where rows are 16-byte aligned.
void Generator::s_gemm_pipeline() {
  const Pipe q = *pipe_;
  const TensorInfo &A = tensors_[q.a], &B = tensors_[q.b];
  TileInfo* C = new_tile(Scope::fragment, f32, {q.M, q.N});
  C->gemm_c = 1;
  std::vector<int64_t> bshape =
      q.trans_b ? std::vector<int64_t>{q.N, q.K} : std::vector<int64_t>{q.K, q.N};
  bool inside = r_.chance(0.5);
  // A row offset that the block's threads compute into a shared tile before the loop, read by
  // the loop's copies (a grouped gemm's group index): issue 14 (e), the warp-specialized producer
  // reads it with no barrier after the consumers' write.
  Expr row_off(0);
  if (o_.ws_shared_index && r_.chance(0.3)) {
    Tile g = alloc_shared({2}, i32);
    int64_t m = r_.range(2, 5);
    parallel({2}, [&](Var i) { g(i) = (Expr(i) + bx_ + by_) % Expr(static_cast<int>(m)); });
    row_off = g(Expr(static_cast<int>(r_.range(0, 1))));
    feature("ws_shared_index");
  }
  auto staged = [&](std::vector<int64_t> shape) {
    tiles_.push_back(TileInfo{alloc_shared(shape, q.t), Scope::shared, q.t, shape, 4, true,
                              loop_level_, 0, true});
    return &tiles_.back();
  };
  TileInfo *As = nullptr, *Bs = nullptr;
  if (!inside) As = staged({q.M, q.K}), Bs = staged(bshape);
  size_t mark = tiles_.size();
  for (TileInfo& t : tiles_)
    t.bound = std::max(t.bound, kOuter);
  ++loop_level_;
  trips_.push_back(q.trips);
  int stages = static_cast<int>(r_.range(1, 4));
  pipelined(ceildiv(A.extent[1], Expr(q.K)), stages, [&](Var k) {
    loop_vars_.push_back(k);
    if (inside) As = staged({q.M, q.K}), Bs = staged(bshape);
    copy(A.tensor.tile(by_ * q.M + row_off, k * q.K), As->tile);
    if (q.trans_b)
      copy(B.tensor.tile(bx_ * q.N, k * q.K), Bs->tile);
    else
      copy(B.tensor.tile(k * q.K, bx_ * q.N), Bs->tile);
    As->uninit = Bs->uninit = false;
    GemmOptions go;
    go.trans_b = q.trans_b;
    gemm(As->tile, Bs->tile, C->tile, go);
    C->locked_level = loop_level_; // accumulating: unreadable until the loop ends
    stmts(static_cast<int>(r_.range(0, 2)), 1);
    loop_vars_.pop_back();
  });
  tiles_.erase(tiles_.begin() + static_cast<std::ptrdiff_t>(mark), tiles_.end());
  trips_.pop_back();
  --loop_level_;
  C->locked_level = 0;
  C->bound += static_cast<double>(q.trips * q.K) * 9;
  feature("pipelined_gemm");
  feature(inside ? "pipelined_gemm_tiles_inside" : "pipelined_gemm_tiles_outside");
}

void Generator::s_fill() {
  TileInfo* t =
      find_tile([&](const TileInfo& x) { return writable(x) && x.scope != Scope::local; });
  if (!t) return s_alloc();
  int v = static_cast<int>(r_.range(-3, 3));
  Expr value = t->dtype == i32 ? Expr(v) : Expr(static_cast<double>(v));
  if (o_.regions && r_.chance(0.4) && (t->scope != Scope::fragment || o_.frag_regions)) {
    std::vector<Expr> m;
    std::vector<int64_t> ext;
    for (int64_t e : t->shape) {
      int64_t x = r_.range(1, e);
      ext.push_back(x);
      m.push_back(Expr(r_.range(0, e - x)));
    }
    fill(t->tile.region(m, ext), value);
    feature("fill_region");
  } else {
    fill(t->tile, value);
    feature("fill");
  }
  t->bound = std::max(t->bound, std::abs(v) * 1.0);
}

// -------------------------------------------------------------------------------------------
// Control flow.

Expr Generator::block_cond() {
  int k = static_cast<int>(r_.range(0, 4));
  if (k == 0) return bx_ == Expr(0);
  if (k == 1) return by_ % Expr(2) == Expr(1);
  if (k == 2) return bx_ + by_ < Expr(static_cast<int>(r_.range(1, 3)));
  if (k == 3 && !loop_vars_.empty()) return Expr(loop_vars_.back()) != Expr(1);
  return bx_ >= by_ || bz_ == Expr(1);
}

void Generator::s_if(int depth) {
  size_t mark = tiles_.size();
  Expr c = block_cond();
  auto branch = [&] {
    size_t m = tiles_.size();
    stmts(static_cast<int>(r_.range(1, 3)), depth + 1);
    tiles_.erase(tiles_.begin() + static_cast<std::ptrdiff_t>(m), tiles_.end());
  };
  if (r_.chance(0.4)) {
    if_then_else(c, branch, branch);
    feature("if_else");
  } else {
    if_then(c, branch);
    feature("if");
  }
  tiles_.erase(tiles_.begin() + static_cast<std::ptrdiff_t>(mark), tiles_.end());
}

void Generator::s_loop(int depth) {
  int kind = static_cast<int>(r_.range(0, 2));
  if (kind == 2 && (!o_.pipelined || pipe_)) kind = 0; // the pipelined gemm is the only one
  int64_t n = r_.range(1, 4);
  size_t mark = tiles_.size();
  // Outer tiles read in the loop may be written later in it (clamped to kOuter): read them as
  // if they were already.
  for (TileInfo& t : tiles_)
    t.bound = std::max(t.bound, kOuter);
  ++loop_level_;
  trips_.push_back(n);
  auto body = [&](Var k) {
    loop_vars_.push_back(k);
    stmts(static_cast<int>(r_.range(1, 4)), depth + 1);
    loop_vars_.pop_back();
  };
  if (kind == 0) {
    if (r_.chance(0.3)) {
      Expr b(static_cast<int>(r_.range(0, 2)));
      serial(b, b + Expr(static_cast<int>(n)), body);
    } else {
      serial(Expr(static_cast<int>(n)), body);
    }
    feature("serial");
  } else if (kind == 1) {
    unrolled(n, body);
    feature("unrolled");
  } else {
    pipelined(Expr(static_cast<int>(n)), static_cast<int>(r_.range(1, 3)), body);
    feature("pipelined");
  }
  tiles_.erase(tiles_.begin() + static_cast<std::ptrdiff_t>(mark), tiles_.end());
  for (TileInfo& t : tiles_)
    if (t.locked_level == loop_level_) t.locked_level = 0;
  trips_.pop_back();
  --loop_level_;
}

// -------------------------------------------------------------------------------------------
// Atomics, local tiles, outputs.

void Generator::s_atomic() {
  TensorInfo* acc = nullptr;
  for (TensorInfo& g : tensors_)
    if (g.spec.role == ArgSpec::Role::accum) acc = &g;
  double mult = static_cast<double>(blocks_);
  for (int64_t n : trips_)
    mult *= static_cast<double>(n);
  if (!acc) {
    // Into a shared f32 tile of this loop level: element atomics from a parallel loop.
    TileInfo* s = find_tile([&](const TileInfo& x) {
      return x.scope == Scope::shared && x.dtype == f32 && !outer(x) && writable(x) &&
             x.shape.size() <= 2;
    });
    TileInfo* src = find_tile([&](const TileInfo& x) {
      return readable(x) && x.exact && x.scope != Scope::local && s && &x != s &&
             x.shape.size() == 2;
    });
    if (!s || !src) return s_fill();
    int64_t lanes = src->shape[0] * src->shape[1];
    double v = 4;
    if (s->bound + static_cast<double>(lanes) * v > kLimit) return;
    parallel(src->shape, [&](Var i, Var j) {
      std::vector<Expr> idx;
      for (size_t d = 0; d < s->shape.size(); ++d)
        idx.push_back((d == 0 ? Expr(i) : Expr(j)) % Expr(s->shape[d]));
      Expr val = clamp(cast(f32, src->tile(i, j)), v);
      atomic_add(s->tile.elem(idx), val);
    });
    s->bound += static_cast<double>(lanes) * v;
    feature("atomic_shared");
    return;
  }
  size_t rank = acc->spec.shape.size();
  bool tile_form = r_.chance(0.4);
  if (tile_form) {
    TileInfo* src = find_tile([&](const TileInfo& x) {
      return readable(x) && x.exact && x.scope != Scope::local && x.dtype == f32 &&
             x.shape.size() == rank && x.bound <= 16;
    });
    if (!src && r_.chance(0.7)) {
      // A fresh tile that fits in the tensor (its tile form needs f32 values below 16).
      std::vector<int64_t> shape;
      for (int64_t e : acc->spec.shape)
        shape.push_back(r_.range(1, std::min<int64_t>(e, 16)));
      double cap = init_cap_;
      bool exact = init_exact_;
      init_cap_ = 16, init_exact_ = true;
      TileInfo* fresh = new_tile(r_.chance(0.5) ? Scope::shared : Scope::fragment, f32, shape);
      init_cap_ = cap, init_exact_ = exact;
      if (fresh->bound <= 16 && fresh->exact) src = fresh;
    }
    if (!src) tile_form = false;
    if (src) {
      // The box: at the block's position (crosses the edge at ragged blocks: issue 14 (b)), or
      // at a fixed offset inside the tensor.
      bool fits = true;
      for (size_t d = 0; d < rank; ++d)
        fits = fits && src->shape[d] <= acc->spec.shape[d];
      std::vector<Expr> m;
      bool at_block = o_.tile_atomic_edge && r_.chance(0.6);
      if (!at_block && !fits) return;
      for (size_t d = 0; d < rank; ++d) {
        if (at_block)
          m.push_back((d + 1 == rank ? bx_ : by_) * src->shape[d]);
        else
          m.push_back(Expr(r_.range(0, acc->spec.shape[d] - src->shape[d])));
      }
      if (acc_bound_ + mult * src->bound > kLimit) return;
      acc_bound_ += mult * src->bound;
      atomic_add(acc->tensor.tile(m), src->tile);
      feature(at_block ? "atomic_tile_edge" : "atomic_tile");
      return;
    }
  }
  // Element form from a parallel loop over a tile, guarded to the tensor's bounds.
  TileInfo* src = find_tile([&](const TileInfo& x) {
    return readable(x) && x.exact && x.scope != Scope::local && x.shape.size() == 2;
  });
  if (!src) return;
  int64_t fold = r_.chance(0.5) ? 1 : 2; // lanes per element
  if (acc_bound_ + mult * static_cast<double>(fold) * 16 > kLimit) return;
  acc_bound_ += mult * static_cast<double>(fold) * 16;
  parallel(src->shape, [&](Var i, Var j) {
    Expr row = rank == 2 ? by_ * src->shape[0] + Expr(i) / Expr(static_cast<int>(fold)) : Expr(0);
    Expr col = rank == 2 ? bx_ * src->shape[1] + Expr(j)
                         : (by_ * 5 + bx_) * src->shape[1] + Expr(j) / Expr(static_cast<int>(fold));
    std::vector<Expr> idx = rank == 2 ? std::vector<Expr>{row, col} : std::vector<Expr>{col};
    Expr ok = row < acc->extent[0] && col < acc->extent.back();
    Expr val = clamp(cast(f32, src->tile(i, j)), 16);
    if_then(ok, [&] { atomic_add(acc->tensor.elem(idx), val); });
  });
  feature("atomic_elem");
}

void Generator::s_local_store() {
  TileInfo* l = find_tile([&](const TileInfo& x) {
    return x.scope == Scope::local && x.shape.size() == 1 && writable(x);
  });
  if (!l) {
    l = new_tile(Scope::local, r_.chance(0.5) ? f32 : i32, {r_.range(1, 9)});
    if (l->scope != Scope::local) return;
  }
  // Element stores outside parallel: every thread computes the same value.
  int64_t at = r_.range(0, l->shape[0] - 1);
  Expr v = Expr(static_cast<int>(r_.range(-3, 3))) + bx_ - by_;
  if (!loop_vars_.empty()) v = v + Expr(loop_vars_.back());
  if (outer(*l)) v = clamp(cast(f32, v), kOuter);
  l->tile(Expr(at)) = l->dtype == i32 ? cast(i32, v) : cast(f32, v);
  l->bound = std::max(l->bound, 16.0);
  feature("local_store");
}

void Generator::store_outputs() {
  for (TensorInfo& g : tensors_)
    if (g.spec.role == ArgSpec::Role::output) store_output(g);
}

void Generator::store_output(TensorInfo& out) {
  size_t rank = out.spec.shape.size();
  DType t = out.spec.dtype;
  auto ok = [&](const TileInfo& x) {
    size_t nonunit = 0;
    for (int64_t e : x.shape)
      nonunit += e != 1;
    return readable(x) && x.scope != Scope::local && x.bound <= cap_of(t) &&
           (t != i32 || x.exact) && x.shape.size() <= rank && (rank != 1 || nonunit <= 1);
  };
  TileInfo* src = find_tile(ok);
  if (!src) {
    std::vector<int64_t> shape =
        rank == 1 ? std::vector<int64_t>{tn_} : std::vector<int64_t>{tm_, tn_};
    double cap = init_cap_;
    init_cap_ = 64; // inside every output dtype's range
    init_exact_ = t == i32;
    src =
        new_tile(r_.chance(0.5) ? Scope::fragment : Scope::shared, r_.chance(0.5) ? f32 : t, shape);
    init_cap_ = cap, init_exact_ = false;
    if (src->scope == Scope::local) return;
  }
  // The block's own box: rows by*a.., columns bx*b.. (1-d: a block-linear offset), and for a
  // 3-d tensor the z index of the block (or the whole depth of a 3-d tile).
  std::vector<int64_t> box = src->shape;
  if (rank == 1) {
    int64_t n = 1;
    for (int64_t e : src->shape)
      n *= e;
    box = {n};
  }
  while (box.size() < rank)
    box.insert(box.begin(), 1);
  std::vector<Expr> m(rank);
  if (rank == 1) {
    m[0] = (by_ * Expr(128) + bx_ + bz_ * Expr(8192)) * box[0];
  } else {
    m[rank - 1] = bx_ * box[rank - 1];
    m[rank - 2] = by_ * box[rank - 2];
    if (rank == 3) m[0] = box[0] == 1 ? bz_ : Expr(0);
  }
  // Writes of one block never overlap another's: a 3-d box over the whole depth is written by
  // the z == 0 blocks only.
  auto store = [&] {
    int k = static_cast<int>(r_.range(0, 3));
    if (k == 0 && o_.regions && (src->scope != Scope::fragment || o_.frag_regions)) {
      std::vector<int64_t> ext = src->shape;
      std::vector<Expr> zero(ext.size(), Expr(0));
      for (int64_t& e : ext)
        e = r_.range(1, e);
      std::vector<int64_t> gbox = ext;
      if (rank == 1) {
        int64_t n = 1;
        for (int64_t e : ext)
          n *= e;
        if (ext.size() != 1) return copy(src->tile, out.tensor.tile(m, box)); // keep it simple
        gbox = {n};
      }
      while (gbox.size() < rank)
        gbox.insert(gbox.begin(), 1);
      copy(src->tile.region(zero, ext), out.tensor.tile(m, gbox));
      feature(src->scope == Scope::fragment ? "frag_region_store" : "region_store");
      return;
    }
    if (k == 1 && src->shape.size() == rank) {
      // Element stores from a parallel loop, guarded to the tensor's bounds.
      std::vector<int64_t> shape = src->shape;
      auto body = [&](const std::vector<Var>& v) {
        std::vector<Expr> idx;
        Expr okb;
        for (size_t d = 0; d < rank; ++d) {
          idx.push_back(m[d] + v[d]);
          Expr c = idx.back() < out.extent[d];
          okb = okb.defined() ? (okb && c) : c;
        }
        std::vector<Expr> sidx(v.begin(), v.end());
        Expr val = src->tile.elem(sidx);
        if (t == i32 && src->dtype != i32) val = cast(i32, val);
        if_then(okb, [&] { out.tensor.elem(idx) = val; });
      };
      if (rank == 1) parallel(shape, [&](Var i) { body({i}); });
      if (rank == 2) parallel(shape, [&](Var i, Var j) { body({i, j}); });
      if (rank == 3) parallel(shape, [&](Var i, Var j, Var l) { body({i, j, l}); });
      feature("elem_store");
      return;
    }
    if (k == 2 && (rank != 1 || src->shape.size() == 1)) return copy(src->tile, out.tensor.tile(m));
    copy(src->tile, out.tensor.tile(m, box));
  };
  bool whole_depth = (rank == 3 && box[0] != 1) || (rank == 2 && grid3_);
  if (whole_depth) {
    if_then(bz_ == Expr(0), store);
  } else {
    store();
  }
  feature(std::string("store_from_") + scope_tag(src->scope));
}

} // namespace

RandomProgram make_random_program(uint64_t seed, const GenOptions& o) {
  RandomProgram p;
  p.seed = seed;
  Generator g(seed, o, p);
  g.build();
  return p;
}

std::vector<HostTensor> make_args(const RandomProgram& p, uint64_t seed) {
  Rng r(seed ^ 0xA5A5A5A5ull);
  std::vector<HostTensor> out;
  for (const ArgSpec& a : p.args) {
    HostTensor h(a.dtype, a.shape);
    if (a.role == ArgSpec::Role::output) {
      h.poison();
    } else {
      for (int64_t i = 0; i < h.numel(); ++i)
        h.set(i, static_cast<double>(r.range(-3, 3)));
    }
    out.push_back(std::move(h));
  }
  return out;
}

std::string compare_outputs(const RandomProgram& p, const std::vector<HostTensor>& want,
                            const std::vector<HostTensor>& got) {
  for (size_t k = 0; k < p.args.size(); ++k) {
    if (p.args[k].role == ArgSpec::Role::input) continue;
    const HostTensor &w = want[k], &g = got[k];
    for (int64_t i = 0; i < w.numel(); ++i) {
      double a = w.get(i), b = g.get(i);
      bool same = (std::isnan(a) && std::isnan(b)) || a == b ||
                  std::abs(a - b) <= p.atol + p.rtol * std::abs(a);
      if (same) continue;
      std::ostringstream os;
      os << "tensor '" << p.args[k].name << "' " << w.shape_str() << " differs first at flat index "
         << i << " [";
      int64_t rem = i;
      std::vector<int64_t> idx(w.shape().size());
      for (int d = static_cast<int>(idx.size()) - 1; d >= 0; --d) {
        idx[d] = rem % w.shape()[d];
        rem /= w.shape()[d];
      }
      for (size_t d = 0; d < idx.size(); ++d)
        os << (d ? ", " : "") << idx[d];
      int64_t bad = 0;
      for (int64_t j = 0; j < w.numel(); ++j) {
        double x = w.get(j), y = g.get(j);
        if (!((std::isnan(x) && std::isnan(y)) || x == y ||
              std::abs(x - y) <= p.atol + p.rtol * std::abs(x)))
          ++bad;
      }
      os << "]: interpreter " << a << ", other " << b << " (" << bad << " of " << w.numel()
         << " elements differ)";
      return os.str();
    }
  }
  return "";
}

std::string describe(const RandomProgram& p) {
  std::ostringstream os;
  os << "seed " << p.seed << ", args:";
  for (const ArgSpec& a : p.args) {
    os << " " << a.name << ":" << dtype_name(a.dtype) << "[";
    for (size_t d = 0; d < a.shape.size(); ++d)
      os << (d ? "," : "") << a.shape[d];
    os << "]"
       << (a.role == ArgSpec::Role::input    ? "in"
           : a.role == ArgSpec::Role::output ? "out"
                                             : "acc");
  }
  os << "\nfeatures:";
  for (const std::string& f : p.features)
    os << " " << f;
  os << "\n" << ir::to_string(p.kernel.node()) << "\n";
  return os.str();
}

} // namespace tp::testing
