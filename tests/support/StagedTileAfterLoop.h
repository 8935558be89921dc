// A pipelined gemm loop whose A tile is also copied out after the loop: Y = A B, and L = the
// last bm x bk tile of A's rows that the block read (its loop's last iteration). With TMA the
// loop is warp-specialized and A's tile has one buffer per stage, so the copy after the loop
// must read the last iteration's stage (docs/semantics.md). Parameters A [M, K], B [K, N],
// Y [M, N] f32, L [M, bk]; grid ceil(N / bn) x ceil(M / bm). In tp::difftest, as the
// differential case StagedTileReadAfterItsLoop (DifferentialCases.h) is its first user.
#pragma once

#include <tilepilot/tilepilot.h>

namespace tp::difftest {

inline Kernel staged_tile_used_after_loop(int64_t bm, int64_t bn, int64_t bk, int threads,
                                          int stages, bool persistent) {
  Dim M("M"), N("N"), K("K");
  Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16), Y("Y", {M, N}, f32), L("L", {M, bk}, bf16);
  return kernel("after_loop", {A, B, Y, L}, grid(ceildiv(N, bn), ceildiv(M, bm)),
                tp::threads(threads), [&](Var bx, Var by) {
                  if (persistent) annotate("persistent", "1");
                  Tile as = alloc_shared({bm, bk}, bf16), bs = alloc_shared({bk, bn}, bf16);
                  Tile acc = alloc_fragment({bm, bn}, f32);
                  clear(acc);
                  pipelined(ceildiv(K, bk), stages, [&](Var k) {
                    copy(A.tile(by * bm, k * bk), as);
                    copy(B.tile(k * bk, bx * bn), bs);
                    gemm(as, bs, acc);
                  });
                  copy(acc, Y.tile(by * bm, bx * bn));
                  copy(as, L.tile(by * bm, 0));
                });
}

} // namespace tp::difftest
