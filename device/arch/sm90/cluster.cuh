// PTX wrappers for thread-block clusters (sm_90) and warp election: CTA rank in the cluster,
// the cluster barrier, shared::cluster address mapping, elect.sync.
#pragma once

#include "defs.cuh"

#if TP_CUDA
namespace tp::sm90 {

/// mov.u32 d, %cluster_ctarank: this CTA's rank in its cluster (0 without clusters).
TP_DEVICE uint32_t cluster_ctarank() {
  uint32_t d;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(d));
  return d;
}

/// mov.u32 d, %cluster_nctarank: number of CTAs in the cluster.
TP_DEVICE uint32_t cluster_nctarank() {
  uint32_t d;
  asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(d));
  return d;
}

/// barrier.cluster.arrive.release: this thread arrives at the cluster barrier (all threads of all
/// CTAs of the cluster must arrive before cluster_wait returns anywhere).
TP_DEVICE void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release;" ::: "memory");
}

/// barrier.cluster.arrive.relaxed: arrival without release ordering.
TP_DEVICE void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
}

/// barrier.cluster.wait.acquire: waits for all arrivals of the current cluster-barrier phase.
TP_DEVICE void cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
}

/// mapa.shared::cluster.u32 d, addr, rank: the shared::cluster address of `addr` (a shared::cta
/// address of this CTA) in the CTA of the cluster with the given rank.
TP_DEVICE uint32_t mapa_shared(uint32_t addr, uint32_t rank) {
  uint32_t d;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(d) : "r"(addr), "r"(rank));
  return d;
}

} // namespace tp::sm90

namespace tp::warp {

/// elect.sync _|p, member_mask: true in exactly one lane of member_mask (the same lane for all).
TP_DEVICE bool elect_one(uint32_t member_mask = 0xffffffffu) {
  uint32_t is_elected;
  asm volatile("{\n"
               ".reg .pred p;\n"
               "elect.sync _|p, %1;\n"
               "selp.u32 %0, 1, 0, p;\n"
               "}\n"
               : "=r"(is_elected)
               : "r"(member_mask));
  return is_elected != 0;
}

} // namespace tp::warp
#endif
