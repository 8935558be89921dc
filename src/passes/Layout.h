// Layouts the CUDA backend assigns to tiles.
//
// A FragmentLayout says which thread holds which element of a fragment in which register:
//   wgmma_acc  [M, N] accumulator of sm_90a wgmma: warpgroup w owns rows [w*M/W, (w+1)*M/W) in
//              m64 slabs; in slab p, register r of thread t (warp q = (t%128)/32, lane l) holds
//              row 64*(w*P + p) + 16*q + l/4 + 8*((r/2)%2), column 8*(r/4) + 2*(l%4) + r%2.
//   mma_acc    [M, N] accumulator of sm_80 mma.sync m16n8k16: warps in a warps_m x warps_n grid,
//              each owning a (M/warps_m) x (N/warps_n) block of 16x8 atoms; in atom (am, an),
//              register e in 0..3 holds row 16*am + l/4 + 8*(e/2), column 8*an + 2*(l%4) + e%2.
//   rows       [M] vector replicated over the threads that hold row i of a parent accumulator:
//              thread t keeps one register per row it owns in the parent.
// Fragments with none of these layouts live in shared memory instead (see InferLayouts).
//
// A SharedLayout maps a 2-d shared tile's (row, col) to its physical element offset: linear
// (row-major, optionally padded) or swizzled in 32/64/128-byte atoms, column chunks of
// swizzle-bytes width stored one after another (the layout TMA writes and wgmma reads).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/IR.h"

namespace tp::passes {

struct FragmentLayout {
  enum class Kind { none, wgmma_acc, mma_acc, rows };
  Kind kind = Kind::none;
  int64_t M = 0, N = 0;         // accumulator shape (rows: M of the parent; N of the parent)
  int warpgroups = 1, slabs = 1; // wgmma_acc: W and P (M = 64 * W * P)
  int warps_m = 1, warps_n = 1;  // mma_acc
  Kind parent = Kind::none;      // rows: the accumulator kind it was derived from

  static FragmentLayout wgmma(int64_t M, int64_t N, int warpgroups);
  static FragmentLayout mma(int64_t M, int64_t N, int warps_m, int warps_n);
  FragmentLayout rows() const;

  bool in_registers() const { return kind != Kind::none; }
  int regs_per_thread() const;
  /// Threads that hold the fragment (the consumer threads).
  int threads() const;
  /// Row and column (columns: accumulators only) of register r in thread t. Both are
  /// expressions; r is a loop variable of an unrolled loop, so the compiler folds them.
  Expr row(const Expr& t, const Expr& r) const;
  Expr col(const Expr& t, const Expr& r) const;
  /// For an accumulator register r, the register of the derived rows layout holding its row.
  Expr rows_reg(const Expr& r) const;
  /// Register arrays: wgmma accumulators are [slabs][N/2] (one wgmma operand per slab).
  std::vector<int64_t> reg_shape() const;
  std::vector<Expr> reg_index(const Expr& r) const;
  /// Same shape, same distribution: element (i, j) is in the same thread and register.
  bool same_as(const FragmentLayout& o) const;
  /// Rows are spread within warps only: a row's values are in lanes of one quad.
  bool rows_within_quad() const;
  std::string str() const;
};

struct SharedLayout {
  enum class Kind { linear, swizzled };
  Kind kind = Kind::linear;
  int swizzle_bytes = 0; // 32, 64, 128 when swizzled
  int64_t rows = 0, cols = 0;
  int elem_bytes = 2;
  int64_t pad = 0; // linear: elements added to each row (bank-conflict padding)

  static SharedLayout linear(int64_t rows, int64_t cols, int elem_bytes, int64_t pad = 0);
  /// Swizzled with the widest atom whose row width divides cols * elem_bytes.
  static SharedLayout swizzled(int64_t rows, int64_t cols, int elem_bytes);
  int64_t chunk_cols() const { return swizzle_bytes / elem_bytes; }
  /// Elements the tile occupies (including padding).
  int64_t size_elems() const;
  /// Physical element offset of (row, col), as an expression and as a constant.
  Expr offset(const Expr& row, const Expr& col) const;
  int64_t offset(int64_t row, int64_t col) const;
  std::string str() const;
};

} // namespace tp::passes
