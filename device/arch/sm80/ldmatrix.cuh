// PTX wrappers for ldmatrix: warp-collective loads of 8x8 b16 matrices from shared memory.
//
// .xN loads N matrices; lanes 8j..8j+7 give the 16-byte-aligned shared addresses of rows 0..7 of
// matrix j (for .x1 only lanes 0..7 matter, .x2 lanes 0..15; the others' addresses are ignored
// but must still be valid operands). Register j of lane l then holds matrix j's row l/4,
// columns 2(l%4) and 2(l%4)+1 (lower column in bits [15:0]); with .trans, the matrix is
// transposed first (lane l gets column l/4, rows 2(l%4), 2(l%4)+1). See mma_layout.cuh for the
// lane addresses that produce mma.m16n8k16 A/B fragments directly.
#pragma once

#include "defs.cuh"

#if TP_CUDA
namespace tp::warp {

/// ldmatrix.sync.aligned.m8n8.x1.shared.b16 {d0}, [addr]
TP_DEVICE void ldmatrix_x1(uint32_t (&d)[1], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];"
               : "=r"(d[0])
               : "r"(addr)
               : "memory");
}

/// ldmatrix.sync.aligned.m8n8.x2.shared.b16 {d0, d1}, [addr]
TP_DEVICE void ldmatrix_x2(uint32_t (&d)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
               : "=r"(d[0]), "=r"(d[1])
               : "r"(addr)
               : "memory");
}

/// ldmatrix.sync.aligned.m8n8.x4.shared.b16 {d0, d1, d2, d3}, [addr]
TP_DEVICE void ldmatrix_x4(uint32_t (&d)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
               : "r"(addr)
               : "memory");
}

/// ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {d0}, [addr]
TP_DEVICE void ldmatrix_x1_trans(uint32_t (&d)[1], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];"
               : "=r"(d[0])
               : "r"(addr)
               : "memory");
}

/// ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {d0, d1}, [addr]
TP_DEVICE void ldmatrix_x2_trans(uint32_t (&d)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
               : "=r"(d[0]), "=r"(d[1])
               : "r"(addr)
               : "memory");
}

/// ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {d0, d1, d2, d3}, [addr]
TP_DEVICE void ldmatrix_x4_trans(uint32_t (&d)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
               : "r"(addr)
               : "memory");
}

} // namespace tp::warp
#endif
