// Layout index arithmetic. The formulas are the PTX ISA's fragment layouts for wgmma (D matrix,
// m64nNk16) and mma.sync (C matrix, m16n8k16), and the swizzle modes of TMA / wgmma operands.
#include "passes/Layout.h"

#include <fmt/format.h>

namespace tp::passes {

FragmentLayout FragmentLayout::wgmma(int64_t M, int64_t N, int warpgroups) {
  internal_assert(M % (64 * warpgroups) == 0)
      << "wgmma layout: M=" << M << " not a multiple of 64 x " << warpgroups << " warpgroups";
  // No bound on N: one instruction's accumulator is at most 256 wide (InferLayouts checks that
  // for an accumulator), but a register A operand is laid out the same way along its K, which
  // takes as many k16 steps as it has.
  internal_assert(N % 8 == 0) << "wgmma layout: N=" << N;
  FragmentLayout l;
  l.kind = Kind::wgmma_acc;
  l.M = M;
  l.N = N;
  l.warpgroups = warpgroups;
  l.slabs = static_cast<int>(M / (64 * warpgroups));
  return l;
}

FragmentLayout FragmentLayout::mma(int64_t M, int64_t N, int warps_m, int warps_n) {
  internal_assert(M % (16 * warps_m) == 0 && N % (8 * warps_n) == 0)
      << "mma layout: " << M << "x" << N << " over " << warps_m << "x" << warps_n << " warps";
  FragmentLayout l;
  l.kind = Kind::mma_acc;
  l.M = M;
  l.N = N;
  l.warps_m = warps_m;
  l.warps_n = warps_n;
  return l;
}

FragmentLayout FragmentLayout::blocked(int64_t M, int64_t N, int vec, int tn, int threads) {
  internal_assert(vec >= 1 && tn >= 1 && N % vec == 0 && threads % tn == 0)
      << "blocked layout: " << M << "x" << N << ", vec " << vec << ", tn " << tn << " of "
      << threads << " threads";
  FragmentLayout l;
  l.kind = Kind::blocked;
  l.M = M;
  l.N = N;
  l.vec = vec;
  l.tn = tn;
  l.tm = threads / tn;
  return l;
}

FragmentLayout FragmentLayout::cols() const {
  internal_assert(kind == Kind::blocked) << "cols of " << str();
  FragmentLayout l = *this;
  l.parent = kind;
  l.kind = Kind::cols;
  return l;
}

bool FragmentLayout::has_rows() const {
  return kind == Kind::blocked || kind == Kind::wgmma_acc || kind == Kind::mma_acc;
}

std::vector<Expr> FragmentLayout::coords(const Expr& t, const Expr& r) const {
  if (kind == Kind::rows) return {row(t, r)};
  if (kind == Kind::cols) return {col(t, r)};
  return {row(t, r), col(t, r)};
}

Expr FragmentLayout::valid(const Expr& t, const Expr& r) const {
  bool rows_of_blocked = kind == Kind::rows && parent == Kind::blocked;
  Expr ok;
  auto both = [&](Expr e) { ok = ok.defined() ? ok && e : e; };
  if ((kind == Kind::blocked || rows_of_blocked) && M % tm != 0) both(row(t, r) < Expr(M));
  // A ragged last run block: a whole run is inside or outside (N is a multiple of vec).
  if ((kind == Kind::blocked || kind == Kind::cols) && ragged_cols()) both(col(t, r) < Expr(N));
  return ok;
}

Expr FragmentLayout::owner(const Expr& t) const {
  if (kind == Kind::rows && parent == Kind::blocked) return tn == 1 ? Expr() : t % tn == 0;
  // An mma row held by warps_n warps side by side: the first of them writes it.
  if (kind == Kind::rows && parent == Kind::mma_acc && warps_n > 1)
    return t % 4 + (t / 32) % Expr(int64_t(warps_n)) == 0; // both terms are >= 0
  if (kind == Kind::rows) return t % 4 == 0;
  if (kind == Kind::cols) return tm == 1 ? Expr() : t < Expr(int64_t(tn));
  return Expr();
}

Expr FragmentLayout::cols_reg(const Expr& r) const {
  internal_assert(kind == Kind::blocked) << "cols_reg of " << str();
  return r % (col_runs() * vec);
}

FragmentLayout FragmentLayout::rows() const {
  internal_assert(kind == Kind::wgmma_acc || kind == Kind::mma_acc || kind == Kind::blocked)
      << "rows of " << str();
  FragmentLayout l = *this;
  l.parent = kind;
  l.kind = Kind::rows;
  return l;
}

int FragmentLayout::threads() const {
  if (elementwise()) return tm * tn;
  Kind k = kind == Kind::rows ? parent : kind;
  return k == Kind::wgmma_acc ? 128 * warpgroups : 32 * warps_m * warps_n;
}

int FragmentLayout::regs_per_thread() const {
  switch (kind) {
  case Kind::wgmma_acc:
    return static_cast<int>(slabs * N / 2);
  case Kind::mma_acc:
    return static_cast<int>((M / warps_m / 16) * (N / warps_n / 8) * 4);
  case Kind::blocked:
    return static_cast<int>(row_blocks() * col_runs() * vec);
  case Kind::cols:
    return static_cast<int>(col_runs() * vec);
  case Kind::rows:
    if (parent == Kind::blocked) return static_cast<int>(row_blocks());
    return parent == Kind::wgmma_acc ? 2 * slabs : static_cast<int>(2 * (M / warps_m / 16));
  case Kind::none:
    return 0;
  }
  return 0;
}

Expr FragmentLayout::row(const Expr& t, const Expr& r) const {
  internal_assert(kind != Kind::cols) << "row of " << str();
  if (kind == Kind::blocked) return (r / (col_runs() * vec)) * tm + t / tn;
  if (kind == Kind::rows && parent == Kind::blocked) return r * tm + t / tn;
  Expr lane = t % 32;
  Kind k = kind == Kind::rows ? parent : kind;
  if (k == Kind::wgmma_acc) {
    Expr p, half;
    if (kind == Kind::wgmma_acc) {
      int64_t per_slab = N / 2;
      p = r / per_slab;
      half = ((r % per_slab) / 2) % 2;
    } else {
      p = r / 2;
      half = r % 2;
    }
    Expr wg = t / 128, warp = (t % 128) / 32;
    return (wg * slabs + p) * 64 + warp * 16 + lane / 4 + half * 8;
  }
  int64_t wm_rows = M / warps_m;
  Expr wm = (t / 32) / warps_n;
  Expr am, half;
  if (kind == Kind::mma_acc) {
    int64_t an_count = N / warps_n / 8;
    am = (r / 4) / an_count;
    half = (r % 4) / 2;
  } else {
    am = r / 2;
    half = r % 2;
  }
  return wm * wm_rows + am * 16 + lane / 4 + half * 8;
}

Expr FragmentLayout::col(const Expr& t, const Expr& r) const {
  if (kind == Kind::blocked || kind == Kind::cols) {
    Expr run = kind == Kind::blocked ? (r / vec) % col_runs() : r / vec;
    return (run * tn + t % tn) * vec + r % vec;
  }
  internal_assert(kind == Kind::wgmma_acc || kind == Kind::mma_acc) << "col of " << str();
  Expr lane = t % 32;
  if (kind == Kind::wgmma_acc) {
    Expr rr = r % (N / 2);
    return (rr / 4) * 8 + rr % 2 + (lane % 4) * 2;
  }
  int64_t wn_cols = N / warps_n, an_count = wn_cols / 8;
  Expr an = (r / 4) % an_count;
  Expr wn = (t / 32) % warps_n;
  return wn * wn_cols + an * 8 + r % 2 + (lane % 4) * 2;
}

int64_t FragmentLayout::chunk_pairs(int64_t w) const {
  internal_assert(kind == Kind::wgmma_acc && w % 8 == 0 && N % w == 0) << "chunks of " << str();
  return slabs * (w / 4);
}

Expr FragmentLayout::chunk_pair_reg(int64_t w, int64_t c, const Expr& q) const {
  internal_assert(kind == Kind::wgmma_acc && w % 8 == 0 && N % w == 0) << "chunks of " << str();
  // In a slab, 8-column group g is registers 4g..4g+3 (pairs at rows +0 and +8), so columns
  // [c w, (c + 1) w) are registers [c w / 2, (c + 1) w / 2): w / 4 pairs a slab.
  const int64_t per_slab = w / 4;
  return (q / per_slab) * (N / 2) + c * (w / 2) + (q % per_slab) * 2;
}

Expr FragmentLayout::rows_reg(const Expr& r) const {
  if (kind == Kind::blocked) return r / (col_runs() * vec);
  if (kind == Kind::wgmma_acc) {
    int64_t per_slab = N / 2;
    return (r / per_slab) * 2 + ((r % per_slab) / 2) % 2;
  }
  internal_assert(kind == Kind::mma_acc) << "rows_reg of " << str();
  int64_t an_count = N / warps_n / 8;
  return ((r / 4) / an_count) * 2 + (r % 4) / 2;
}

std::vector<int64_t> FragmentLayout::reg_shape() const {
  if (kind == Kind::wgmma_acc) return {slabs, N / 2};
  return {regs_per_thread()};
}

std::vector<Expr> FragmentLayout::reg_index(const Expr& r) const {
  if (kind == Kind::wgmma_acc) return {r / (N / 2), r % (N / 2)};
  return {r};
}

bool FragmentLayout::same_as(const FragmentLayout& o) const {
  if (kind != o.kind) return false;
  if (elementwise() || o.elementwise()) {
    if (parent != o.parent || tm != o.tm || tn != o.tn) return false;
    if (kind == Kind::rows) return M == o.M;
    if (kind == Kind::cols) return N == o.N && vec == o.vec;
    return M == o.M && N == o.N && vec == o.vec;
  }
  Kind k = kind == Kind::rows ? parent : kind;
  if (kind == Kind::rows && parent != o.parent) return false;
  bool cols_matter = kind != Kind::rows;
  if (M != o.M || (cols_matter && N != o.N)) return false;
  if (k == Kind::wgmma_acc) return warpgroups == o.warpgroups;
  if (kind == Kind::rows) return warps_m == o.warps_m && warps_n == o.warps_n;
  return warps_m == o.warps_m && warps_n == o.warps_n;
}

bool FragmentLayout::rows_within_quad() const {
  Kind k = kind == Kind::rows ? parent : kind;
  return k == Kind::wgmma_acc || warps_n == 1;
}

std::string FragmentLayout::str() const {
  switch (kind) {
  case Kind::wgmma_acc:
    return fmt::format("wgmma_acc[{}x{}, {} warpgroups]", M, N, warpgroups);
  case Kind::mma_acc:
    return fmt::format("mma_acc[{}x{}, warps {}x{}]", M, N, warps_m, warps_n);
  case Kind::blocked:
    return fmt::format("blocked[{}x{}, vec {}, threads {}x{}]", M, N, vec, tm, tn);
  case Kind::cols:
    return fmt::format("cols_of(blocked)[{}, vec {}, threads {}x{}]", N, vec, tm, tn);
  case Kind::rows:
    if (parent == Kind::blocked)
      return fmt::format("rows_of(blocked)[{}, threads {}x{}]", M, tm, tn);
    return fmt::format("rows_of({})", parent == Kind::wgmma_acc ? "wgmma_acc" : "mma_acc") +
           fmt::format("[{}]", M);
  case Kind::none:
    return "shared";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------

// An accumulator's rows: the four lanes of a quad share a row (shuffle-xor 1, 2); with mma
// warps side by side along N (warps_n > 1), the warps at xor distances 32, 64, ... hold the
// same rows too, and combine through shared memory.
ReducePlan plan_accumulator_reduce(const FragmentLayout& src, int dim) {
  ReducePlan p;
  if (dim != 1) {
    p.why_not = "an accumulator reduces along dim 1 (its rows) only";
    return p;
  }
  p.shuffle_masks = {1, 2};
  if (src.kind == FragmentLayout::Kind::mma_acc)
    for (int w = 1; w < src.warps_n; w *= 2)
      p.cross_warp_masks.push_back(32 * w);
  p.result = src.rows();
  p.per_thread = src.regs_per_thread() / p.result.regs_per_thread();
  if (!p.cross_warp_masks.empty())
    p.scratch_elems = int64_t(src.threads()) * p.result.regs_per_thread();
  p.supported = true;
  return p;
}

ReducePlan plan_reduce(const FragmentLayout& src, int dim) {
  ReducePlan p;
  if (src.kind == FragmentLayout::Kind::wgmma_acc || src.kind == FragmentLayout::Kind::mma_acc)
    return plan_accumulator_reduce(src, dim);
  if (src.kind != FragmentLayout::Kind::blocked) {
    p.why_not =
        "only blocked fragments and accumulators reduce through this plan, not " + src.str();
    return p;
  }
  if (dim != 0 && dim != 1) {
    p.why_not = "a blocked fragment has dims 0 and 1";
    return p;
  }
  // Thread index bits: the low log2(tn) select the column run, the others the row. Reducing a
  // row combines the threads that differ in the low bits; reducing a column, the high bits.
  int lo = dim == 1 ? 1 : src.tn, hi = dim == 1 ? src.tn : src.tn * src.tm;
  for (int m = lo; m < hi; m *= 2)
    (m < 32 ? p.shuffle_masks : p.cross_warp_masks).push_back(m);
  p.result = dim == 1 ? src.rows() : src.cols();
  p.per_thread = static_cast<int>(dim == 1 ? src.col_runs() * src.vec : src.row_blocks());
  if (!p.cross_warp_masks.empty())
    p.scratch_elems = int64_t(src.threads()) * p.result.regs_per_thread();
  p.supported = true;
  return p;
}

std::string ReducePlan::str() const {
  if (!supported) return "unsupported: " + why_not;
  std::string s = fmt::format("{} per thread", per_thread);
  auto list = [](const std::vector<int>& v) {
    std::string o;
    for (int m : v)
      o += (o.empty() ? "" : ",") + std::to_string(m);
    return o;
  };
  if (!shuffle_masks.empty()) s += ", shuffle xor " + list(shuffle_masks);
  if (!cross_warp_masks.empty())
    s += fmt::format(", across warps xor {} through {} f32 of shared memory",
                     list(cross_warp_masks), scratch_elems);
  return s + " -> " + result.str();
}

SharedLayout SharedLayout::linear(int64_t rows, int64_t cols, int elem_bytes, int64_t pad) {
  SharedLayout l;
  l.kind = Kind::linear;
  l.rows = rows;
  l.cols = cols;
  l.elem_bytes = elem_bytes;
  l.pad = pad;
  return l;
}

SharedLayout SharedLayout::swizzled(int64_t rows, int64_t cols, int elem_bytes, int64_t period) {
  SharedLayout l;
  l.kind = Kind::swizzled;
  l.rows = rows;
  l.cols = cols;
  l.elem_bytes = elem_bytes;
  int64_t row_bytes = cols * elem_bytes;
  l.swizzle_bytes = row_bytes % 128 == 0 ? 128 : row_bytes % 64 == 0 ? 64 : 32;
  internal_assert(row_bytes % l.swizzle_bytes == 0)
      << "swizzled layout needs rows of a multiple of 32 bytes, got " << row_bytes;
  l.period = period ? period : 128 / l.swizzle_bytes;
  internal_assert(l.period > 0 && (l.period & (l.period - 1)) == 0)
      << "swizzle period " << l.period << " is not a power of two";
  return l;
}

int64_t SharedLayout::size_elems() const {
  return kind == Kind::linear ? rows * (cols + pad) : rows * cols;
}

// Swizzle: the 16-byte unit index within a row is XORed with (row / period) % units, where a
// row holds 8, 4 or 2 units (128, 64, 32 bytes). With the hardware's period = 128 / row bytes
// one atom is 1024 bytes, and tiles are placed at 1024-byte aligned addresses.
Expr SharedLayout::offset(const Expr& row, const Expr& col) const {
  if (kind == Kind::linear) return row * (cols + pad) + col;
  int64_t cc = chunk_cols();          // elements per swizzle row
  int64_t unit = 16 / elem_bytes;     // elements per 16-byte unit
  int64_t units = swizzle_bytes / 16; // units per row: 8, 4, 2
  Expr chunk = col / cc, within = col % cc;
  Expr u = within / unit, e = within % unit;
  Expr sw = (row / period) % units;
  Expr x = ir::Binary::make(ir::BinOp::bit_xor, u, sw);
  return chunk * (rows * cc) + row * cc + x * unit + e;
}

int64_t SharedLayout::offset(int64_t row, int64_t col) const {
  if (kind == Kind::linear) return row * (cols + pad) + col;
  int64_t cc = chunk_cols(), unit = 16 / elem_bytes, units = swizzle_bytes / 16;
  int64_t chunk = col / cc, within = col % cc;
  int64_t u = within / unit, e = within % unit;
  int64_t x = u ^ ((row / period) % units);
  return chunk * (rows * cc) + row * cc + x * unit + e;
}

std::string SharedLayout::str() const {
  if (kind == Kind::linear)
    return pad ? fmt::format("linear[{}x{}+{}]", rows, cols, pad)
               : fmt::format("linear[{}x{}]", rows, cols);
  if (hardware_swizzle()) return fmt::format("swizzle{}B[{}x{}]", swizzle_bytes, rows, cols);
  return fmt::format("swizzle{}B[{}x{}, xor by row/{}]", swizzle_bytes, rows, cols, period);
}

std::pair<Expr, Expr> shared_row_col(const ir::Buffer& b, const std::vector<Expr>& idx) {
  if (idx.size() == 2) return {idx[0], idx[1]};
  if (idx.size() == 1) return {Expr(0), idx[0]};
  std::vector<int64_t> s = b->const_shape();
  return {idx[0] * s[1] + idx[1], idx[2]};
}

} // namespace tp::passes
