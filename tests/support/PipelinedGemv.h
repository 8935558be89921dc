// A GEMV whose pipelined loop stages a [16, 64] tile of A and a 1-d [64] slice of x in shared
// memory: the 1-d tile is one TMA does not take, so the loop exercises the cp.async plan on
// sm_90a as well as on sm_80. y = A x in f32.
#pragma once
#include <tilepilot/tilepilot.h>

namespace tp::testing {

inline Kernel pipelined_gemv(Schedule schedule) {
  Dim M("M"), K("K");
  Tensor A("A", {M, K}, bf16), X("x", {K}, bf16), Y("y", {M}, f32);
  return kernel("gemv_shared", {A, X, Y}, grid(ceildiv(M, 16)), threads(128), [&](Var by) {
    Tile as = alloc_shared({16, 64}, bf16), xs = alloc_shared({64}, bf16);
    Tile part = alloc_fragment({16, 64}, f32), y = alloc_fragment({16}, f32);
    clear(part);
    pipelined(ceildiv(K, 64), schedule, [&](Var k) {
      copy(A.tile(by * 16, k * 64), as);
      copy(X.tile(k * 64), xs);
      parallel({16, 64}, [&](Var i, Var j) { part(i, j) = part(i, j) + as(i, j) * xs(j); });
    });
    reduce_sum(part, y, 1);
    copy(y, Y.tile(by * 16));
  });
}

inline Kernel pipelined_gemv(int stages) {
  return pipelined_gemv(Schedule{.stages = stages});
}

} // namespace tp::testing
