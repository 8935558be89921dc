// A 64 x 64 gemm accumulator for the pass tests about writing one out (paired stores and
// atomics): acc = A[row0 : row0 + 64, :] B[:, col0 : col0 + 64], a serial K loop of 64-wide
// steps through shared tiles. With 128 threads it is one warpgroup's wgmma accumulator on
// sm_90a and an mma accumulator on sm_80.
#pragma once

#include <tilepilot/tilepilot.h>

namespace tp::testing {

inline Tile accumulator_64(const Tensor& A, const Tensor& B, const Expr& row0, const Expr& col0,
                           const Expr& K) {
  Tile as = alloc_shared({64, 64}, bf16), bs = alloc_shared({64, 64}, bf16);
  Tile acc = alloc_fragment({64, 64}, f32);
  clear(acc);
  serial(ceildiv(K, 64), [&](Var k) {
    copy(A.tile(row0, k * 64), as);
    copy(B.tile(k * 64, col0), bs);
    gemm(as, bs, acc);
  });
  return acc;
}

} // namespace tp::testing
