// What wgmma.mma_async.m64nNk16 (.f16/.bf16 inputs, .f32 accumulators) means for registers:
// the thread/value layouts of the accumulator D and of the register operand A (RS variant).
//
// Source: PTX ISA 9.7.15.5.1.1.1 "Matrix Fragments for wgmma.mma_async.m64nNk16", Figures
// "WGMMA .m64nNk16 register fragment layout for matrix A" / "for accumulator matrix D". Warp w of
// the warpgroup (w = (thread / 32) % 4) owns rows [16w, 16w + 16); inside its 16 rows each warp
// holds exactly the mma.m16n8k16 fragment (mma_layout.cuh), repeated along N for D:
//   D, register r in [0, N/2), lane l:  row = 16w + l/4 + 8 * ((r/2) % 2)
//                                       col = 8 * (r/4) + 2 * (l%4) + (r%2)
//   A, element i in [0, 8) (register i/2, i%2 = half, lower half first), lane l:
//                                       row = 16w + l/4 + 8 * ((i/2) % 2)
//                                       col = 2 * (l%4) + (i%2) + 8 * (i/4)
// Consequence used when an accumulator, cast, feeds the next wgmma as A (registers to registers): the A registers for
// k16 step kk of a 64xK operand are the f32 accumulators of columns [16kk, 16kk+16) of a 64xK
// accumulator tile: a[q] = pack(d[8kk + 2q], d[8kk + 2q + 1]), q = 0..3 (wgmma_acc_index_for_a).
// @post wgmma_acc maps (thread, r) one-to-one onto 64 x N; wgmma_a maps (thread, i) one-to-one
// onto 64 x 16 (tests/device/LayoutTest.cpp).
#pragma once

#include "defs.cuh"

namespace tp::sm90 {

/// Accumulator register r (0..N/2-1) of warpgroup thread t (0..127) -> (row, col) of 64 x N D.
TP_HOST_DEVICE constexpr Coord wgmma_acc(int t, int r) {
  return {16 * ((t / 32) % 4) + (t % 32) / 4 + 8 * ((r / 2) % 2),
          8 * (r / 4) + 2 * (t % 4) + r % 2};
}

/// A-operand element i (0..7; register i/2, half i%2) of thread t -> (row, col) of 64 x 16 A.
TP_HOST_DEVICE constexpr Coord wgmma_a(int t, int i) {
  return {16 * ((t / 32) % 4) + (t % 32) / 4 + 8 * ((i / 2) % 2),
          2 * (t % 4) + i % 2 + 8 * (i / 4)};
}

/// Index into a 64 x K f32 accumulator of the value that becomes half `h` (0 = low) of A register
/// q (0..3) for k16 step kk: same thread, same (row, col).
TP_HOST_DEVICE constexpr int wgmma_acc_index_for_a(int kk, int q, int h) {
  return 8 * kk + 2 * q + h;
}

} // namespace tp::sm90
