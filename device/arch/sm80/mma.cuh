// PTX wrappers for warp-level tensor-core MMA: mma.sync.aligned.m16n8k16 with f32 accumulators.
//
// All 32 lanes of the warp must call together (tp::warp). Fragment layouts (which (row, col)
// each lane's registers hold) are in mma_layout.cuh; in short, with g = lane/4, t = lane%4:
//   a[0] = A(g, 2t..2t+1)  a[1] = A(g+8, 2t..)  a[2] = A(g, 2t+8..)  a[3] = A(g+8, 2t+8..)
//   b[0] = B(2t..2t+1, g)  b[1] = B(2t+8..2t+9, g)          (B is K x N, "col" = k contiguous)
//   c[0..1] = C(g, 2t..2t+1)   c[2..3] = C(g+8, 2t..2t+1)
// Each 32-bit A/B register packs two 16-bit elements, the lower-indexed k in bits [15:0].
#pragma once

#include "arch/sm80/mma_layout.cuh"
#include "defs.cuh"

#if TP_CUDA
namespace tp::warp {

/// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {d0..d3}, {a0..a3}, {b0, b1}, {c0..c3}:
/// D (16x8 f32) = A (16x16 bf16, row) * B (16x8 bf16, col) + C. d and c may be the same array.
TP_DEVICE void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                 const float (&c)[4]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
               "{%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]),
                 "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

/// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32: as above with f16 A and B.
TP_DEVICE void mma_m16n8k16_f16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                const float (&c)[4]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
               "{%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]),
                 "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

} // namespace tp::warp
#endif
