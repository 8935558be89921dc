// Warpgroup MMA (sm_90a): wgmma.fence / commit_group / wait_group and the m64nNk16 multiplies.
//
// All 128 threads of a warpgroup (4 consecutive warps, warp index % 4 == 0 first) call these
// together (tp::warpgroup). Protocol for one k-block:
//   fence();                        // wgmma.fence: order prior register/smem writes before wgmma
//   mma_async_ss<bf16, N>(d, a_desc, b_desc, scale_d);   // one call per k16 step
//   commit_group();                 // close the batch
//   wait_group<0>();                // until done; d must not be touched while wgmma is pending
// fence() is required before the first wgmma, and whenever the accumulator or A registers were
// written by other instructions since the last wgmma. fence_operand(d) stops the compiler from
// moving accumulator reads/writes across the asynchronous wgmma (call it on d before fence() and
// after wait_group()). Operand layouts: smem_desc.cuh (descriptors), wgmma_layout.cuh (registers).
#pragma once

#include "arch/sm90/smem_desc.cuh"
#include "arch/sm90/wgmma_layout.cuh"
#include "arch/sm90/wgmma_ops.cuh"
#include "defs.cuh"
#include "types.cuh"

#if TP_CUDA
namespace tp::warpgroup {

/// wgmma.fence.sync.aligned: orders prior accesses to wgmma registers/shared memory before the
/// following wgmma.mma_async.
TP_DEVICE void fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}

/// wgmma.commit_group.sync.aligned: closes the group of this warpgroup's pending wgmma.mma_async.
TP_DEVICE void commit_group() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

/// wgmma.wait_group.sync.aligned N: waits until at most N wgmma groups are pending.
template <int N>
TP_DEVICE void wait_group() {
  static_assert(N >= 0, "wgmma.wait_group takes a non-negative count");
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

/// Compiler-only fence on every accumulator register (empty asm with "+f" operands).
template <int R>
TP_DEVICE void fence_operand(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i)
    asm volatile("" : "+f"(d[i])::"memory");
}

/// The same for packed A-operand registers: no write may move above the wait of the wgmma
/// that reads them.
template <int R>
TP_DEVICE void fence_operand(int (&a)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i)
    asm volatile("" : "+r"(a[i])::"memory");
}

/// A-operand registers for k16 step kk, taken from an f32 accumulator tile of this warpgroup
/// (same thread/element mapping, see wgmma_layout.cuh), rounded to bf16.
template <int R>
TP_DEVICE void acc_to_a_bf16(uint32_t (&a)[4], const float (&d)[R], int kk) {
#pragma unroll
  for (int q = 0; q < 4; ++q)
    a[q] = to_bf16x2(d[sm90::wgmma_acc_index_for_a(kk, q, 0)],
                     d[sm90::wgmma_acc_index_for_a(kk, q, 1)])
               .bits;
}

/// As acc_to_a_bf16, rounded to f16.
template <int R>
TP_DEVICE void acc_to_a_f16(uint32_t (&a)[4], const float (&d)[R], int kk) {
#pragma unroll
  for (int q = 0; q < 4; ++q)
    a[q] = to_half2x(d[sm90::wgmma_acc_index_for_a(kk, q, 0)],
                     d[sm90::wgmma_acc_index_for_a(kk, q, 1)])
               .bits;
}

} // namespace tp::warpgroup
#endif
