// Kernels shared by the scalar-parameter, let and strided-tensor tests (CPU and GPU): each is a
// small instance of what a user writes with these features.
#pragma once
#include "tilepilot/tilepilot.h"

namespace tp::test {

/// Y = X * scale + shift over 16x32 tiles through shared memory; X (and Y) strided when asked.
inline Kernel scale_shift(bool strided_x, bool strided_y = false) {
  Dim M("M"), N("N");
  Tensor X = strided_x ? Tensor("X", {M, N}, f32, strided) : Tensor("X", {M, N}, f32);
  Tensor Y = strided_y ? Tensor("Y", {M, N}, f32, strided) : Tensor("Y", {M, N}, f32);
  Scalar scale("scale", f32), shift("shift", i32);
  return kernel(
      "scale_shift", {X, scale, Y, shift}, grid(ceildiv(N, 32), ceildiv(M, 16)), threads(128),
      [&](Var bx, Var by) {
        Tile t = alloc_shared({16, 32}, f32);
        copy(X.tile(by * 16, bx * 32), t);
        parallel({16, 32}, [&](Var i, Var j) { t(i, j) = t(i, j) * scale + cast(f32, shift); });
        copy(t, Y.tile(by * 16, bx * 32));
      });
}

/// C = A * B (bf16 in, f32 out) with 64x64x32 tiles and a 3-stage pipelined loop whose tile
/// offsets are lets (one per block, one per iteration); A, B and C strided when asked.
inline Kernel let_gemm(bool strided_a = false, bool strided_b = false, bool strided_c = false) {
  Dim M("M"), N("N"), K("K");
  auto make = [](const char* n, std::vector<Expr> s, DType t, bool st) {
    return st ? Tensor(n, std::move(s), t, strided) : Tensor(n, std::move(s), t);
  };
  Tensor A = make("A", {M, K}, bf16, strided_a), B = make("B", {K, N}, bf16, strided_b);
  Tensor C = make("C", {M, N}, f32, strided_c);
  return kernel("let_gemm", {A, B, C}, grid(ceildiv(N, 64), ceildiv(M, 64)), threads(128),
                [&](Var bx, Var by) {
                  Var row0 = let("row0", by * 64);
                  Var col0 = let("col0", bx * 64);
                  Tile As = alloc_shared({64, 32}, bf16);
                  Tile Bs = alloc_shared({32, 64}, bf16);
                  Tile acc = alloc_fragment({64, 64}, f32);
                  clear(acc);
                  pipelined(ceildiv(K, 32), 3, [&](Var k) {
                    Var k0 = let("k0", k * 32);
                    copy(A.tile(row0, k0), As);
                    copy(B.tile(k0, col0), Bs);
                    gemm(As, Bs, acc);
                  });
                  copy(acc, C.tile(row0, col0));
                });
}

/// let_gemm whose block row comes from a table, as in a grouped GEMM: Rows[by] read into a let
/// straight from global memory, or (from_tile) through a shared tile the block fills first.
inline Kernel table_gemm(bool from_tile) {
  Dim M("M"), N("N"), K("K"), G("G");
  Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16), C("C", {M, N}, f32);
  Tensor Rows("Rows", {G}, i32);
  return kernel("table_gemm", {A, B, C, Rows}, grid(ceildiv(N, 64), G), threads(128),
                [&](Var bx, Var by) {
                  Tile idx = alloc_shared({1, 1}, i32);
                  if (from_tile) parallel({1, 1}, [&](Var i, Var j) { idx(i, j) = Rows(by); });
                  Var row0 = let("row0", from_tile ? Expr(idx(0, 0)) : Expr(Rows(by)));
                  Tile As = alloc_shared({64, 32}, bf16);
                  Tile Bs = alloc_shared({32, 64}, bf16);
                  Tile acc = alloc_fragment({64, 64}, f32);
                  clear(acc);
                  pipelined(ceildiv(K, 32), 3, [&](Var k) {
                    copy(A.tile(row0, k * 32), As);
                    copy(B.tile(k * 32, bx * 64), Bs);
                    gemm(As, Bs, acc);
                  });
                  copy(acc, C.tile(row0, bx * 64));
                });
}

/// fp64 reference of let_gemm on dense row-major tensors.
inline void gemm_reference(const HostTensor& a, const HostTensor& b, HostTensor& c) {
  int64_t M = a.shape()[0], K = a.shape()[1], N = b.shape()[1];
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += a.get(i * K + k) * b.get(k * N + j);
      c.set(i * N + j, s);
    }
}

} // namespace tp::test
