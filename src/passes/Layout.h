// Layouts the CUDA backend assigns to tiles.
//
// A FragmentLayout says which thread holds which element of a fragment in which register:
//   wgmma_acc  [M, N] accumulator of sm_90a wgmma: warpgroup w owns rows [w*M/W, (w+1)*M/W) in
//              m64 slabs; in slab p, register r of thread t (warp q = (t%128)/32, lane l) holds
//              row 64*(w*P + p) + 16*q + l/4 + 8*((r/2)%2), column 8*(r/4) + 2*(l%4) + r%2.
//   mma_acc    [M, N] accumulator of sm_80 mma.sync m16n8k16: warps in a warps_m x warps_n grid,
//              each owning a (M/warps_m) x (N/warps_n) block of 16x8 atoms; in atom (am, an),
//              register e in 0..3 holds row 16*am + l/4 + 8*(e/2), column 8*an + 2*(l%4) + e%2.
//   rows       [M] vector replicated over the threads that hold row i of a parent (an
//              accumulator or a blocked layout): thread t keeps one register per row it owns.
//   blocked    [M, N] element-wise fragment: threads in a tm x tn grid (t = ti * tn + tj, tn a
//              power of two), each holding runs of `vec` adjacent elements of a row, so that a
//              run is one 16-byte global access; element (i, j) is in thread
//              (i % tm) * tn + (j / vec) % tn, register ((i / tm) * cn + j / (vec * tn)) * vec +
//              j % vec with cn = ceil(N / (vec * tn)). Adjacent threads hold adjacent runs of a
//              row. When tm does not divide M, the last row block's registers past M are unused;
//              when vec * tn does not divide N (ragged columns: a row of 5000 over 128 threads),
//              the registers of the last run block past N are (valid() guards both).
//   cols       [N] vector in the column distribution of a blocked layout, replicated over its
//              tm thread rows (also the layout of a lone 1-D fragment: a blocked [1, N]'s row).
// Fragments with none of these layouts live in shared memory instead (see InferLayouts).
//
// A SharedLayout maps a 2-d shared tile's (row, col) to its physical element offset: linear
// (row-major, optionally padded) or swizzled in 32/64/128-byte atoms, column chunks of
// swizzle-bytes width stored one after another. With the hardware's period (128 / swizzle
// bytes rows share one XOR value) it is the layout TMA writes and wgmma reads; a tile that
// neither touches may take another period (ChooseSharedSwizzles.h), which moves the same whole
// 16-byte units and only changes which rows XOR alike.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ir/IR.h"

namespace tp::passes {

struct FragmentLayout {
  enum class Kind { none, wgmma_acc, mma_acc, rows, blocked, cols };
  Kind kind = Kind::none;
  int64_t M = 0, N = 0;          // accumulator shape (rows: M of the parent; N of the parent)
  int warpgroups = 1, slabs = 1; // wgmma_acc: W and P (M = 64 * W * P)
  int warps_m = 1, warps_n = 1;  // mma_acc
  Kind parent = Kind::none;      // rows: the accumulator kind it was derived from
  int vec = 1, tm = 1, tn = 1;   // blocked, cols, rows of blocked: see above

  static FragmentLayout wgmma(int64_t M, int64_t N, int warpgroups);
  static FragmentLayout mma(int64_t M, int64_t N, int warps_m, int warps_n);
  /// @pre N % vec == 0, threads % tn == 0.
  static FragmentLayout blocked(int64_t M, int64_t N, int vec, int tn, int threads);
  FragmentLayout rows() const;
  /// The column vector of a blocked layout.
  FragmentLayout cols() const;

  /// blocked, cols, or rows of a blocked layout (the element-wise family).
  bool elementwise() const {
    return kind == Kind::blocked || kind == Kind::cols ||
           (kind == Kind::rows && parent == Kind::blocked);
  }
  /// Logical rank of the fragment (1 for rows and cols).
  int rank() const { return kind == Kind::rows || kind == Kind::cols ? 1 : 2; }
  /// The fragment's coordinates of register r of thread t ({row, col}, or one for rank 1).
  std::vector<Expr> coords(const Expr& t, const Expr& r) const;
  /// Whether register r of thread t holds an element: undefined (always) unless some registers
  /// lie past the tile's last row (a blocked layout whose tm does not divide M) or its last
  /// column (ragged columns).
  Expr valid(const Expr& t, const Expr& r) const;
  /// Of the threads holding the same replicated element, the one that writes it to memory:
  /// undefined when elements are not replicated.
  Expr owner(const Expr& t) const;
  /// For a blocked register r, the register of its cols layout holding its column.
  Expr cols_reg(const Expr& r) const;
  int64_t row_blocks() const { return (M + tm - 1) / tm; }
  int64_t col_runs() const { return (N + vec * tn - 1) / (vec * tn); }
  /// Blocked or cols whose last run block is partly past N.
  bool ragged_cols() const { return N % (int64_t(vec) * tn) != 0; }

  bool in_registers() const { return kind != Kind::none; }
  int regs_per_thread() const;
  /// Registers 2q and 2q+1 of every thread hold adjacent columns of one row (the accumulators),
  /// so a write of both can be one 2-element access (paired stores and atomics).
  bool adjacent_column_pairs() const {
    return (kind == Kind::wgmma_acc || kind == Kind::mma_acc) && regs_per_thread() % 2 == 0;
  }
  /// Threads that hold the fragment (the consumer threads).
  int threads() const;
  /// Row and column (columns: accumulators only) of register r in thread t. Both are
  /// expressions; r is a loop variable of an unrolled loop, so the compiler folds them.
  Expr row(const Expr& t, const Expr& r) const;
  Expr col(const Expr& t, const Expr& r) const;
  /// wgmma_acc: every thread's registers holding columns [c * w, (c + 1) * w), w a multiple of
  /// 8, as chunk_pairs(w) adjacent-column pairs; pair q (0 <= q < chunk_pairs(w)) starts at
  /// register chunk_pair_reg(w, c, q). Which registers a column chunk has does not depend on
  /// the thread: a thread's columns within an 8-column group are its lane's.
  int64_t chunk_pairs(int64_t w) const;
  Expr chunk_pair_reg(int64_t w, int64_t c, const Expr& q) const;
  /// For an accumulator register r, the register of the derived rows layout holding its row.
  Expr rows_reg(const Expr& r) const;
  /// Register arrays: wgmma accumulators are [slabs][N/2] (one wgmma operand per slab).
  std::vector<int64_t> reg_shape() const;
  std::vector<Expr> reg_index(const Expr& r) const;
  /// Same shape, same distribution: element (i, j) is in the same thread and register.
  bool same_as(const FragmentLayout& o) const;
  /// Rows are spread within warps only: a row's values are in lanes of one quad.
  bool rows_within_quad() const;
  /// A row vector (rows()) can be derived: accumulators and blocked. An mma row spread over
  /// warps_n warps is replicated in each of them (a reduction combines them through shared).
  bool has_rows() const;
  std::string str() const;
};

/// How a reduction along `dim` of a register fragment (blocked, or an accumulator along its
/// rows) combines its values: each thread folds
/// `per_thread` of its registers per output register, then lanes exchange values with
/// shuffle-xor over `shuffle_masks`, then (when one output element spans several warps) threads
/// combine through shared memory with the threads at xor distances `cross_warp_masks`.
struct ReducePlan {
  bool supported = false;
  std::string why_not;
  int per_thread = 0;
  std::vector<int> shuffle_masks, cross_warp_masks;
  FragmentLayout result;     // the layout of the reduced fragment
  int64_t scratch_elems = 0; // f32 scratch in shared memory (cross-warp only)
  std::string str() const;
};
ReducePlan plan_reduce(const FragmentLayout& src, int dim);

struct SharedLayout {
  enum class Kind { linear, swizzled };
  Kind kind = Kind::linear;
  int swizzle_bytes = 0; // 32, 64, 128 when swizzled
  int64_t rows = 0, cols = 0;
  int elem_bytes = 2;
  int64_t pad = 0;    // linear: elements added to each row (bank-conflict padding)
  int64_t period = 0; // swizzled: rows that share one XOR value (a power of two)

  static SharedLayout linear(int64_t rows, int64_t cols, int elem_bytes, int64_t pad = 0);
  /// Swizzled with the widest atom whose row width divides cols * elem_bytes; `period` 0 is
  /// the hardware's (what TMA and wgmma take).
  static SharedLayout swizzled(int64_t rows, int64_t cols, int elem_bytes, int64_t period = 0);
  int64_t chunk_cols() const { return swizzle_bytes / elem_bytes; }
  /// Swizzled as TMA writes and wgmma reads: the hardware's period.
  bool hardware_swizzle() const { return kind == Kind::swizzled && period == 128 / swizzle_bytes; }
  /// Elements the tile occupies (including padding).
  int64_t size_elems() const;
  /// Physical element offset of (row, col), as an expression and as a constant.
  Expr offset(const Expr& row, const Expr& col) const;
  int64_t offset(int64_t row, int64_t col) const;
  std::string str() const;
};

/// A shared tile's element index as the (row, col) its SharedLayout takes: a 1-d index is in
/// row 0; a rank-3 tile's first two dimensions together are its rows.
std::pair<Expr, Expr> shared_row_col(const ir::Buffer& b, const std::vector<Expr>& idx);

} // namespace tp::passes
