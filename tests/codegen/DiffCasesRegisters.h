// Differential cases of fragments held in registers: row reductions within and across warps, and
// ragged row and column runs (DifferentialCases.h lists them).
#pragma once
#include "DiffCase.h"

namespace tp::difftest {

/// Row reductions of a register fragment (per-thread partials, shuffles, cross-warp scratch):
/// a sum into an f32 tensor and a max into a bf16 one, rows past the tensor's end not stored.
/// `N` columns over `bm`-row blocks of `threads_` threads decides whether a row stays in one
/// warp or spans several.
inline DiffCase register_row_reduce(const std::string& name, DType in, int64_t rows, int64_t N,
                                    int64_t bm, int threads_) {
  DiffCase c;
  c.name = name;
  Dim M("M");
  Tensor X("X", {M, N}, in), S("S", {M}, f32), Mx("Mx", {M}, bf16);
  c.kernel =
      kernel("rrr_" + name, {X, S, Mx}, grid(ceildiv(M, bm)), threads(threads_), [&](Var by) {
        Tile x = alloc_fragment({bm, N}, f32);
        Tile s = alloc_fragment({bm}, f32), m = alloc_fragment({bm}, f32);
        copy(X.tile(by * bm, 0), x);
        reduce_sum(x, s, 1);
        reduce_max(x, m, 1);
        copy(s, S.tile(by * bm));
        copy(m, Mx.tile(by * bm));
      });
  c.args = {ints(in, {rows, N}, 21), sentinel(f32, {rows}), sentinel(bf16, {rows})};
  c.outputs = {1, 2};
  c.expect = [N](std::vector<HostTensor>& a) {
    int64_t R = a[1].shape()[0];
    for (int64_t i = 0; i < R; ++i) {
      double sum = 0, mx = -INFINITY;
      for (int64_t j = 0; j < N; ++j) {
        sum += a[0].get(i * N + j);
        mx = std::fmax(mx, a[0].get(i * N + j));
      }
      a[1].set(i, sum);
      a[2].set(i, mx);
    }
  };
  return c;
}

/// A row of 32 f32 over 8 lanes: shuffles only; 37 rows, so the last 16-row block is ragged.
inline DiffCase register_reduce_in_one_warp() {
  return register_row_reduce("RegisterRowReduceWithinAWarp", f32, 37, 32, 16, 128);
}

/// A row of 1024 bf16 over 128 threads (4 warps): shuffles then the cross-warp step; 5 rows.
inline DiffCase register_reduce_across_warps() {
  return register_row_reduce("RegisterRowReduceAcrossWarps", bf16, 5, 1024, 2, 256);
}

/// A blocked fragment whose thread rows do not divide its rows (5 x 48 f32 over 32 x 4 threads:
/// most threads hold no row): row sums, column sums (dim 0, across warps), and the tile
/// scaled by its row sums and offset by a column vector, all in registers.
inline DiffCase register_ragged_rows_and_columns() {
  DiffCase c;
  c.name = "RegisterFragmentWithRaggedRowBlock";
  Dim M("M");
  Tensor X("X", {M, 48}, f32), V("V", {48}, f32), Y("Y", {M, 48}, f32), Cs("Cs", {M, 48}, f32);
  c.kernel = kernel("ragged", {X, V, Y, Cs}, grid(ceildiv(M, 5)), threads(128), [&](Var by) {
    Tile x = alloc_fragment({5, 48}, f32), v = alloc_fragment({48}, f32);
    Tile rs = alloc_fragment({5}, f32), cs = alloc_fragment({48}, f32);
    copy(X.tile(by * 5, 0), x);
    copy(V.tile(0), v);
    reduce_sum(x, rs, 1);
    reduce_sum(x, cs, 0);
    parallel({5, 48}, [&](Var i, Var j) { x(i, j) = x(i, j) * rs(i) + v(j); });
    copy(x, Y.tile(by * 5, 0));
    // Each block's column sums go to the first row of its block in Cs.
    copy(cs, Cs.tile({by * 5, 0}, {1, 48}));
  });
  c.args = {ints(f32, {12, 48}, 5), ints(f32, {48}, 6), sentinel(f32, {12, 48}),
            sentinel(f32, {12, 48})};
  c.outputs = {2, 3};
  c.expect = [](std::vector<HostTensor>& a) {
    for (int64_t i = 0; i < 12; ++i) {
      double rs = 0;
      for (int64_t j = 0; j < 48; ++j)
        rs += a[0].get(i * 48 + j);
      for (int64_t j = 0; j < 48; ++j)
        a[2].set(i * 48 + j, a[0].get(i * 48 + j) * rs + a[1].get(j));
    }
    for (int64_t b = 0; b * 5 < 12; ++b)
      for (int64_t j = 0; j < 48; ++j) {
        double cs = 0;
        for (int64_t i = b * 5; i < std::min<int64_t>(12, b * 5 + 5); ++i)
          cs += a[0].get(i * 48 + j);
        a[3].set(b * 5 * 48 + j, cs);
      }
  };
  return c;
}

/// A blocked fragment whose 16-byte runs no power of two of threads divides (N = 1000 bf16:
/// 125 runs of 8), so the layout spreads them over more threads than divide them and the last
/// run block is ragged (registers past N hold nothing): row sums, column sums (dim 0), the tile
/// scaled by its row sums plus a column vector, a round trip through a shared tile, all in
/// registers. `bm` rows a block over `threads_` threads.
inline DiffCase register_ragged_columns(const std::string& name, int64_t rows, int64_t bm,
                                        int64_t N, int threads_) {
  DiffCase c;
  c.name = name;
  Dim M("M");
  Tensor X("X", {M, N}, bf16), V("V", {N}, bf16), Y("Y", {M, N}, f32), Cs("Cs", {M, N}, f32);
  c.kernel = kernel("ragged_cols_" + name, {X, V, Y, Cs}, grid(ceildiv(M, bm)), threads(threads_),
                    [&](Var by) {
                      Tile x = alloc_fragment({bm, N}, f32), v = alloc_fragment({N}, f32);
                      Tile rs = alloc_fragment({bm}, f32), cs = alloc_fragment({N}, f32);
                      Tile sx = alloc_shared({bm, N}, f32);
                      copy(X.tile(by * bm, 0), x);
                      copy(V.tile(0), v);
                      reduce_sum(x, rs, 1);
                      reduce_sum(x, cs, 0);
                      parallel({bm, N}, [&](Var i, Var j) { x(i, j) = x(i, j) * rs(i) + v(j); });
                      copy(x, sx);
                      copy(sx, x);
                      copy(x, Y.tile(by * bm, 0));
                      // Each block's column sums go to the first row of its block in Cs.
                      copy(cs, Cs.tile({by * bm, 0}, {1, N}));
                    });
  c.args = {ints(bf16, {rows, N}, 8), ints(bf16, {N}, 9), sentinel(f32, {rows, N}),
            sentinel(f32, {rows, N})};
  c.outputs = {2, 3};
  c.expect = [rows, bm, N](std::vector<HostTensor>& a) {
    for (int64_t i = 0; i < rows; ++i) {
      double rs = 0;
      for (int64_t j = 0; j < N; ++j)
        rs += a[0].get(i * N + j);
      for (int64_t j = 0; j < N; ++j)
        a[2].set(i * N + j, a[0].get(i * N + j) * rs + a[1].get(j));
    }
    for (int64_t b = 0; b * bm < rows; ++b)
      for (int64_t j = 0; j < N; ++j) {
        double cs = 0;
        for (int64_t i = b * bm; i < std::min(rows, b * bm + bm); ++i)
          cs += a[0].get(i * N + j);
        a[3].set(b * bm * N + j, cs);
      }
  };
  return c;
}

/// Two rows of 1000 over 128 threads (64 x 2): two run blocks, the second ragged; 5 rows.
inline DiffCase register_ragged_columns_two_rows() {
  return register_ragged_columns("RegisterFragmentWithRaggedColumnRuns", 5, 2, 1000, 128);
}

/// One row of 5000 (625 runs) over 256 threads: three run blocks, the last ragged, the row sum
/// across warps.
inline DiffCase register_ragged_columns_one_row() {
  return register_ragged_columns("RegisterRowWithRaggedColumnRuns", 3, 1, 5000, 256);
}

} // namespace tp::difftest
