// PTX wrappers for CTA barriers (bar.sync / bar.arrive), warp shuffles and lane queries.
//
// tp::block:: functions must be reached by every thread the barrier counts (all warps execute
// them converged: bar.sync is .aligned). tp::warp:: functions must be reached by every lane named
// in member_mask (default: the full warp).
#pragma once

#include "defs.cuh"

#if TP_CUDA
namespace tp::block {

/// bar.sync 0: barrier 0 over all threads of the CTA (what __syncthreads() does).
TP_DEVICE void sync() {
  asm volatile("bar.sync 0;" ::: "memory");
}

/// bar.sync id, count: named barrier `id` (0..15) over `count` threads (a multiple of 32).
TP_DEVICE void named_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}

/// bar.arrive id, count: arrive at named barrier `id` without waiting (producer side).
TP_DEVICE void named_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
}

} // namespace tp::block

namespace tp::warp {

/// bar.warp.sync member_mask: converge and order memory among the lanes in member_mask.
TP_DEVICE void sync(uint32_t member_mask = 0xffffffffu) {
  asm volatile("bar.warp.sync %0;" ::"r"(member_mask) : "memory");
}

/// mov.u32 d, %laneid: this thread's lane in its warp (0..31).
TP_DEVICE uint32_t lane_id() {
  uint32_t d;
  asm("mov.u32 %0, %%laneid;" : "=r"(d));
  return d;
}

/// shfl.sync.bfly.b32 d, a, lane_mask, 0x1f, member_mask: d = a from lane (laneid ^ lane_mask).
TP_DEVICE uint32_t shfl_xor(uint32_t a, int lane_mask, uint32_t member_mask = 0xffffffffu) {
  uint32_t d;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, %3;"
               : "=r"(d)
               : "r"(a), "r"(lane_mask), "r"(member_mask));
  return d;
}

/// shfl.sync.bfly.b32 on an f32 value: d = a from lane (laneid ^ lane_mask).
TP_DEVICE float shfl_xor(float a, int lane_mask, uint32_t member_mask = 0xffffffffu) {
  float d;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, %3;"
               : "=f"(d)
               : "f"(a), "r"(lane_mask), "r"(member_mask));
  return d;
}

/// shfl.sync.idx.b32 d, a, src_lane, 0x1f, member_mask: d = a from lane src_lane (broadcast).
TP_DEVICE uint32_t shfl_idx(uint32_t a, int src_lane, uint32_t member_mask = 0xffffffffu) {
  uint32_t d;
  asm volatile("shfl.sync.idx.b32 %0, %1, %2, 0x1f, %3;"
               : "=r"(d)
               : "r"(a), "r"(src_lane), "r"(member_mask));
  return d;
}

/// shfl.sync.idx.b32 on an f32 value: d = a from lane src_lane.
TP_DEVICE float shfl_idx(float a, int src_lane, uint32_t member_mask = 0xffffffffu) {
  float d;
  asm volatile("shfl.sync.idx.b32 %0, %1, %2, 0x1f, %3;"
               : "=f"(d)
               : "f"(a), "r"(src_lane), "r"(member_mask));
  return d;
}

/// shfl.sync.down.b32 d, a, delta, 0x1f, member_mask: d = a from lane laneid + delta (own value
/// when that lane is past 31).
TP_DEVICE float shfl_down(float a, int delta, uint32_t member_mask = 0xffffffffu) {
  float d;
  asm volatile("shfl.sync.down.b32 %0, %1, %2, 0x1f, %3;"
               : "=f"(d)
               : "f"(a), "r"(delta), "r"(member_mask));
  return d;
}

/// shfl.sync.down.b32 d, a, 1, c, member_mask with c = ((32 - width) << 8) | 0x1f: d = a from
/// lane laneid + 1 of the same `width`-lane segment (own value in a segment's last lane).
TP_DEVICE uint32_t shfl_down1(uint32_t a, int width, uint32_t member_mask) {
  uint32_t d;
  asm volatile("shfl.sync.down.b32 %0, %1, 1, %2, %3;"
               : "=r"(d)
               : "r"(a), "r"(((32 - width) << 8) | 0x1f), "r"(member_mask));
  return d;
}

/// shfl.sync.up.b32 d, a, 1, c, member_mask with c = (32 - width) << 8: d = a from lane
/// laneid - 1 of the same `width`-lane segment (own value in a segment's first lane).
TP_DEVICE uint32_t shfl_up1(uint32_t a, int width, uint32_t member_mask) {
  uint32_t d;
  asm volatile("shfl.sync.up.b32 %0, %1, 1, %2, %3;"
               : "=r"(d)
               : "r"(a), "r"((32 - width) << 8), "r"(member_mask));
  return d;
}

/// activemask.b32 d: the lanes of this warp executing this instruction together.
TP_DEVICE uint32_t active_mask() {
  uint32_t d;
  asm volatile("activemask.b32 %0;" : "=r"(d));
  return d;
}

} // namespace tp::warp
#endif
