// A pipelined loop of two gemms with element-wise work between them, the shape of a
// flash-attention step, for pass tests of the loop schedules: s = q kᵀ, p = exp2(s) in bf16,
// o += p v over a 128-row block of 64-column rows.
#pragma once
#include <tilepilot/tilepilot.h>

namespace tp::testing {

/// The loop with schedule `sc`, `threads` consumer threads, and the persistent annotation when
/// asked for.
inline Kernel two_gemm_loop(Schedule sc, int threads = 256, bool persistent = false) {
  Dim S("S");
  Tensor Q("Q", {S, 64}, bf16), K("K", {S, 64}, bf16), V("V", {S, 64}, bf16);
  Tensor O("O", {S, 64}, f32);
  return kernel("two_gemms", {Q, K, V, O}, grid(ceildiv(S, 128)), tp::threads(threads),
                [&](Var bx) {
                  if (persistent) annotate("persistent", "1");
                  Tile qs = alloc_shared({128, 64}, bf16), ks = alloc_shared({64, 64}, bf16);
                  Tile vs = alloc_shared({64, 64}, bf16);
                  Tile s = alloc_fragment({128, 64}, f32), p = alloc_fragment({128, 64}, bf16);
                  Tile o = alloc_fragment({128, 64}, f32);
                  copy(Q.tile(bx * 128, 0), qs);
                  clear(o);
                  pipelined(ceildiv(S, 64), sc, [&](Var j) {
                    copy(K.tile(j * 64, 0), ks);
                    copy(V.tile(j * 64, 0), vs);
                    gemm(qs, ks, s, {.trans_b = true, .clear = true});
                    parallel({128, 64}, [&](Var i, Var c) { s(i, c) = exp2(s(i, c)); });
                    copy(s, p);
                    gemm(p, vs, o);
                  });
                  copy(o, O.tile(bx * 128, 0));
                });
}

} // namespace tp::testing
