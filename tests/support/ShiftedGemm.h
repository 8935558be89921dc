// A pipelined gemm loop whose A tile starts `shift` columns off the K step and 3 rows above the
// block's rows: C[i, j] = sum over the loop's k steps of A[i - 3, 64 k + shift + c] B[64 k + c, j]
// (A zero outside the tensor). Parameters A [M, K] bf16, B [K, N] bf16, C [M, N] f32; 128 x 128
// blocks, K steps of 64, one warpgroup, `stages` buffers. A TMA box starts on the tensor's
// 16-byte grid, so shifts that are not a multiple of 8 take another plan; one stage has no
// spare buffer for the gemm left in flight. Used by the pass tests (PlanScheduleTest.cpp) and
// the differential cases (DifferentialCases.h).
#pragma once

#include <tilepilot/tilepilot.h>

namespace tp::difftest {

inline Kernel shifted_gemm(int64_t shift, int stages) {
  Dim M("M"), N("N"), K("K");
  Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16), C("C", {M, N}, f32);
  return kernel("shifted_gemm", {A, B, C}, grid(ceildiv(N, 128), ceildiv(M, 128)), tp::threads(128),
                [&](Var bx, Var by) {
                  Tile as = alloc_shared({128, 64}, bf16), bs = alloc_shared({64, 128}, bf16);
                  Tile acc = alloc_fragment({128, 128}, f32);
                  clear(acc);
                  pipelined(ceildiv(K, 64), stages, [&](Var k) {
                    copy(A.tile(by * 128 - 3, k * 64 + shift), as);
                    copy(B.tile(k * 64, bx * 128), bs);
                    gemm(as, bs, acc);
                  });
                  copy(acc, C.tile(by * 128, bx * 128));
                });
}

} // namespace tp::difftest
