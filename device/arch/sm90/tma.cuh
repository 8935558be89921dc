// PTX wrappers for the Tensor Memory Accelerator (sm_90): tiled bulk tensor loads into shared
// memory that complete on an mbarrier, bulk tensor stores from shared memory, their bulk groups,
// and tensor-map prefetch.
//
// Per-thread instructions (tp::sm90): one elected thread issues each copy. Coordinates are
// element indices, innermost (contiguous) dimension first, and may be negative or past the end:
// out-of-bounds elements are zero-filled on loads and skipped on stores. `tmap` is the generic
// address of a 128-byte CUtensorMap: a `const __grid_constant__ TensorMap` kernel parameter (or one
// in global/const memory). A load of B bytes must be matched by expect-tx of B bytes on `mbar`
// (mbarrier.cuh). Before a TMA store reads data written by ordinary st.shared, the writers must
// execute fence_proxy_async_shared() (fence.cuh) and synchronize with the issuing thread.
#pragma once

#include "defs.cuh"

namespace tp {

/// Storage of a CUtensorMap (128 bytes, 64-byte aligned), filled on the host by
/// cuTensorMapEncodeTiled and passed by value as a `const __grid_constant__` kernel parameter.
struct alignas(64) TensorMap {
  unsigned long long opaque[16];
};
static_assert(sizeof(TensorMap) == 128, "CUtensorMap is 128 bytes");

} // namespace tp

#if TP_CUDA
namespace tp::sm90 {

/// cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
///   [dst], [tmap, {c0, c1}], [mbar]: box at (c0, c1) -> shared dst; completes tx bytes on mbar.
TP_DEVICE void tma_load_2d(uint32_t dst, const void* tmap, uint32_t mbar, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%3, %4}], [%2];" ::"r"(dst),
               "l"(tmap), "r"(mbar), "r"(c0), "r"(c1)
               : "memory");
}

/// cp.async.bulk.tensor.3d...: [dst], [tmap, {c0, c1, c2}], [mbar].
TP_DEVICE void tma_load_3d(uint32_t dst, const void* tmap, uint32_t mbar, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%3, %4, %5}], [%2];" ::"r"(dst),
               "l"(tmap), "r"(mbar), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}

/// cp.async.bulk.tensor.4d...: [dst], [tmap, {c0, c1, c2, c3}], [mbar].
TP_DEVICE void tma_load_4d(uint32_t dst, const void* tmap, uint32_t mbar, int c0, int c1, int c2,
                           int c3) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%3, %4, %5, %6}], [%2];" ::"r"(dst),
               "l"(tmap), "r"(mbar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}

/// cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster
///   [dst], [tmap, {c0, c1}], [mbar], cta_mask: one box lands at the same shared offset `dst` in
///   every CTA of the cluster whose bit is set in cta_mask, and completes its bytes on the
///   mbarrier at offset `mbar` in each of them. Each receiving CTA expects the whole box.
TP_DEVICE void tma_load_2d_multicast(uint32_t dst, const void* tmap, uint32_t mbar,
                                     uint16_t cta_mask, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
               ".multicast::cluster [%0], [%1, {%4, %5}], [%2], %3;" ::"r"(dst),
               "l"(tmap), "r"(mbar), "h"(cta_mask), "r"(c0), "r"(c1)
               : "memory");
}

/// The 3-d multicast load: [dst], [tmap, {c0, c1, c2}], [mbar], cta_mask.
TP_DEVICE void tma_load_3d_multicast(uint32_t dst, const void* tmap, uint32_t mbar,
                                     uint16_t cta_mask, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
               ".multicast::cluster [%0], [%1, {%4, %5, %6}], [%2], %3;" ::"r"(dst),
               "l"(tmap), "r"(mbar), "h"(cta_mask), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}

/// The 4-d multicast load: [dst], [tmap, {c0, c1, c2, c3}], [mbar], cta_mask.
TP_DEVICE void tma_load_4d_multicast(uint32_t dst, const void* tmap, uint32_t mbar,
                                     uint16_t cta_mask, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
               ".multicast::cluster [%0], [%1, {%4, %5, %6, %7}], [%2], %3;" ::"r"(dst),
               "l"(tmap), "r"(mbar), "h"(cta_mask), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}

/// cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [tmap, {c0, c1}], [src]: shared src ->
/// box at (c0, c1). Joins the current bulk group (tma_store_commit / tma_store_wait_read).
TP_DEVICE void tma_store_2d(const void* tmap, int c0, int c1, uint32_t src) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(tmap),
      "r"(src), "r"(c0), "r"(c1)
      : "memory");
}

/// cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [tmap, {c0, c1, c2}], [src].
TP_DEVICE void tma_store_3d(const void* tmap, int c0, int c1, int c2, uint32_t src) {
  asm volatile(
      "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(tmap),
      "r"(src), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

/// cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [tmap, {c0, c1, c2, c3}], [src].
TP_DEVICE void tma_store_4d(const void* tmap, int c0, int c1, int c2, int c3, uint32_t src) {
  asm volatile(
      "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];" ::"l"(
          tmap),
      "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

/// cp.async.bulk.commit_group: closes this thread's group of bulk (store) copies.
TP_DEVICE void tma_store_commit() {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

/// cp.async.bulk.wait_group.read N: waits until at most N groups still READ their shared source
/// (the shared buffer may then be overwritten; the global writes may still be in flight).
template <int N>
TP_DEVICE void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

/// cp.async.bulk.wait_group N: waits until at most N groups are pending entirely (writes done).
template <int N>
TP_DEVICE void tma_store_wait() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}

/// prefetch.tensormap [tmap]: brings the tensor map into the cache ahead of the first copy.
TP_DEVICE void prefetch_tensormap(const void* tmap) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(tmap) : "memory");
}

} // namespace tp::sm90
#endif
