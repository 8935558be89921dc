// PTX wrappers for stmatrix (sm_90): warp-collective stores of 8x8 b16 matrices to shared memory,
// the inverse of ldmatrix (arch/sm80/ldmatrix.cuh).
//
// .xN stores N matrices; lanes 8j..8j+7 give the 16-byte-aligned shared addresses of rows 0..7
// of matrix j. Register j of lane l holds matrix j's row l/4, columns 2(l%4), 2(l%4)+1 (lower
// column in bits [15:0]); with .trans the register holds column l/4, rows 2(l%4), 2(l%4)+1.
// So an mma/wgmma accumulator converted to bf16x2 (row g, columns 2t..2t+1) stores directly.
#pragma once

#include "defs.cuh"

#if TP_CUDA
namespace tp::warp {

/// stmatrix.sync.aligned.m8n8.x1.shared.b16 [addr], {r0}
TP_DEVICE void stmatrix_x1(uint32_t addr, const uint32_t (&r)[1]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%0], {%1};" ::"r"(addr), "r"(r[0])
               : "memory");
}

/// stmatrix.sync.aligned.m8n8.x2.shared.b16 [addr], {r0, r1}
TP_DEVICE void stmatrix_x2(uint32_t addr, const uint32_t (&r)[2]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};" ::"r"(addr), "r"(r[0]),
               "r"(r[1])
               : "memory");
}

/// stmatrix.sync.aligned.m8n8.x4.shared.b16 [addr], {r0, r1, r2, r3}
TP_DEVICE void stmatrix_x4(uint32_t addr, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr),
               "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

/// stmatrix.sync.aligned.m8n8.x1.trans.shared.b16 [addr], {r0}
TP_DEVICE void stmatrix_x1_trans(uint32_t addr, const uint32_t (&r)[1]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x1.trans.shared.b16 [%0], {%1};" ::"r"(addr), "r"(r[0])
               : "memory");
}

/// stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [addr], {r0, r1}
TP_DEVICE void stmatrix_x2_trans(uint32_t addr, const uint32_t (&r)[2]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};" ::"r"(addr),
               "r"(r[0]), "r"(r[1])
               : "memory");
}

/// stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [addr], {r0, r1, r2, r3}
TP_DEVICE void stmatrix_x4_trans(uint32_t addr, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr),
               "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

} // namespace tp::warp
#endif
