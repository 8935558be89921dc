// PTX wrappers for mbarrier objects (sm_90): init/inval, arrive (with expected transaction
// bytes for TMA), and phase-parity waits.
//
// An mbarrier is a 64-bit object in shared memory (8-byte aligned), addressed here by its 32-bit
// shared address. Phase k completes when `count` arrivals have happened and all expected
// transaction bytes have landed; waiters pass the parity of the phase they wait for (k & 1) and
// flip it each time they pass. After init, fence_mbarrier_init() (fence.cuh) plus a CTA/cluster
// barrier make the initialized object visible to other threads and to the async proxy.
#pragma once

#include "defs.cuh"

#if TP_CUDA
namespace tp::sm90 {

/// mbarrier.init.shared::cta.b64 [bar], count: phase 0, expecting `count` arrivals.
TP_DEVICE void mbarrier_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

/// mbarrier.inval.shared::cta.b64 [bar]: ends the object's life (before reusing its memory).
TP_DEVICE void mbarrier_inval(uint32_t bar) {
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}

/// mbarrier.arrive.shared::cta.b64 _, [bar]: one arrival (release semantics, CTA scope).
TP_DEVICE void mbarrier_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

/// mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], tx_bytes: expect tx_bytes more
/// transaction bytes, then one arrival. The usual call before issuing TMA loads on `bar`.
TP_DEVICE void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t tx_bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(tx_bytes)
               : "memory");
}

/// mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [bar], tx_bytes: expect more bytes, no arrival.
TP_DEVICE void mbarrier_expect_tx(uint32_t bar, uint32_t tx_bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(tx_bytes)
               : "memory");
}

/// mbarrier.arrive.shared::cluster.b64 _, [remote]: one arrival on the barrier at `remote`, a
/// shared::cluster address from mapa_shared (cluster.cuh), possibly another CTA's. The default
/// semantics (release at CTA scope) are enough for the one use, a consumer freeing a stage whose
/// async-proxy reads wgmma.wait_group has already completed. `.release.cluster` made ptxas put a
/// MEMBAR.ALL.GPU and an ERRBAR before every arrival, and the 2-CTA cluster GEMM ran 2.2x slower
/// than without clusters (H100, 2026-12-05; 1.03-1.04x with this form).
TP_DEVICE void mbarrier_arrive_cluster(uint32_t remote) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}

/// mbarrier.try_wait.parity.shared::cta.b64 done, [bar], parity, suspend_ns: true once the phase
/// with the given parity has completed (acquire, CTA scope); may suspend the thread up to
/// suspend_ns nanoseconds (a hint) while it has not.
TP_DEVICE bool mbarrier_try_wait_parity(uint32_t bar, uint32_t parity, uint32_t suspend_ns) {
  uint32_t done;
  asm volatile("{\n"
               ".reg .pred p;\n"
               "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\n"
               "selp.u32 %0, 1, 0, p;\n"
               "}\n"
               : "=r"(done)
               : "r"(bar), "r"(parity), "r"(suspend_ns)
               : "memory");
  return done != 0;
}

/// Blocks until the phase with the given parity of `bar` has completed (try_wait loop).
TP_DEVICE void mbarrier_wait_parity(uint32_t bar, uint32_t parity, uint32_t suspend_ns = 1000000) {
  while (!mbarrier_try_wait_parity(bar, parity, suspend_ns)) {}
}

} // namespace tp::sm90
#endif
