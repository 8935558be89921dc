// What mma.sync.m16n8k16 (.f16/.bf16) and ldmatrix mean: thread/value layouts, as pure functions.
//
// Source: PTX ISA 9.7.14.5.8 (in ISA 9.x numbering 9.7.15.5.8) "Matrix Fragments for mma.m16n8k16
// with floating point type". With g = lane / 4 (groupID) and t = lane % 4 (threadID_in_group):
//   A (16x16, row = m, col = k), 8 halves a0..a7 in 4 registers (register j = {a[2j], a[2j+1]},
//     a[2j] in bits [15:0]):   row = g + 8 * ((i / 2) % 2),  col = 2t + (i % 2) + 8 * (i / 4)
//     i.e. reg0 = (g, 2t..2t+1), reg1 = (g+8, 2t..), reg2 = (g, 2t+8..), reg3 = (g+8, 2t+8..).
//   B (16x8, row = k, col = n), 4 halves b0..b3 in 2 registers:
//     row = 2t + (i % 2) + 8 * (i / 2),  col = g
//   C/D (16x8 f32), 4 floats c0..c3:  row = g + 8 * (i / 2),  col = 2t + (i % 2)
// ldmatrix .m8n8 (.b16): lane l supplies the address of row (l % 8) of matrix (l / 8); result
// register j of every lane holds matrix j, lane l getting row l / 4, columns 2(l % 4), 2(l % 4) + 1
// (with .trans: row and column of the stored matrix swap). The *_src helpers give the shared-tile
// coordinate each lane must point at so that ldmatrix.x4 yields exactly the mma fragment.
// @post every function is a bijection from (lane, i) onto its tile (tests/device/LayoutTest.cpp).
#pragma once

#include "defs.cuh"

namespace tp::sm80 {

/// A element i (0..7) of lane -> (m, k) in the 16x16 A tile.
TP_HOST_DEVICE constexpr Coord mma16816_a(int lane, int i) {
  return {lane / 4 + 8 * ((i / 2) % 2), 2 * (lane % 4) + (i % 2) + 8 * (i / 4)};
}
/// B element i (0..3) of lane -> (k, n) in the 16x8 B tile.
TP_HOST_DEVICE constexpr Coord mma16816_b(int lane, int i) {
  return {2 * (lane % 4) + (i % 2) + 8 * (i / 2), lane / 4};
}
/// C/D element i (0..3) of lane -> (m, n) in the 16x8 accumulator tile.
TP_HOST_DEVICE constexpr Coord mma16816_c(int lane, int i) {
  return {lane / 4 + 8 * (i / 2), 2 * (lane % 4) + (i % 2)};
}

/// ldmatrix.x4 (no .trans) of a 16x16 A tile stored m-major rows (k contiguous): the (m, k) of
/// the first element of the 16-byte row lane `lane` must address. Result = mma16816_a fragment.
TP_HOST_DEVICE constexpr Coord ldmatrix_x4_a_src(int lane) {
  return {lane % 16, 8 * (lane / 16)};
}

/// ldmatrix.x4 (no .trans) of B for TWO n8 tiles, stored as [n][k] (k contiguous): the (n, k) the
/// lane must address. Registers {0,1} = B fragment of n 0..7, registers {2,3} = n 8..15.
TP_HOST_DEVICE constexpr Coord ldmatrix_x4_b_src(int lane) {
  return {lane % 8 + 8 * (lane / 16), 8 * ((lane / 8) % 2)};
}

/// ldmatrix.x4.trans of B for two n8 tiles, stored as [k][n] (n contiguous): the (k, n) the lane
/// must address. Registers {0,1} = B fragment of n 0..7, registers {2,3} = n 8..15.
TP_HOST_DEVICE constexpr Coord ldmatrix_x4_trans_b_src(int lane) {
  return {lane % 8 + 8 * ((lane / 8) % 2), 8 * (lane / 16)};
}

} // namespace tp::sm80
