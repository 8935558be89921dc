// PTX wrappers for memory fences (sm_90): proxy fences between the generic proxy (ordinary
// loads/stores) and the async proxy (TMA, wgmma operands), acquire-release fences, and the
// mbarrier-init fence.
#pragma once

#include "defs.cuh"

#if TP_CUDA
namespace tp::sm90 {

/// fence.proxy.async.shared::cta: orders this thread's generic-proxy shared-memory accesses with
/// later async-proxy accesses (e.g. st.shared before a TMA store or wgmma reads that data).
TP_DEVICE void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

/// fence.proxy.async: as above for all state spaces (global too, e.g. before a TMA load reads
/// data this kernel wrote with ordinary stores).
TP_DEVICE void fence_proxy_async() {
  asm volatile("fence.proxy.async;" ::: "memory");
}

/// fence.acq_rel.cta: acquire-release fence at CTA scope.
TP_DEVICE void fence_acq_rel_cta() {
  asm volatile("fence.acq_rel.cta;" ::: "memory");
}

/// fence.acq_rel.cluster: acquire-release fence at cluster scope.
TP_DEVICE void fence_acq_rel_cluster() {
  asm volatile("fence.acq_rel.cluster;" ::: "memory");
}

/// fence.acq_rel.gpu: acquire-release fence at GPU scope (e.g. before a global flag store).
TP_DEVICE void fence_acq_rel_gpu() {
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
}

/// fence.mbarrier_init.release.cluster: makes prior mbarrier.init visible to the cluster and the
/// async proxy (TMA complete_tx); follow with a CTA or cluster barrier.
TP_DEVICE void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

} // namespace tp::sm90
#endif
