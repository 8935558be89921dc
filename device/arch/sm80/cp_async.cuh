// PTX wrappers for cp.async (sm_80 asynchronous global -> shared copies) and its groups.
//
// Per-thread instructions (tp::sm80). Out-of-bounds predication uses the src-size operand: bytes
// past src_bytes are zero-filled in shared memory and not read from global memory, so a masked
// copy passes src_bytes = 0 (keep `src` a valid address anyway, e.g. the tensor base).
// cp_async_chunk() picks the widest of these a chunk's address allows.
// Completion: cp_async_commit() closes a group; cp_async_wait<N>() waits until at most N groups
// are pending, then the copies of the others are visible to this thread (use a CTA barrier before
// other threads read them).
#pragma once

#include "defs.cuh"
#include "arch/sm80/smem.cuh"

#if TP_CUDA
namespace tp::sm80 {

/// cp.async.cg.shared.global [dst], [src], 16, src_bytes: 16-byte copy bypassing L1; dst and src
/// 16-byte aligned; bytes [src_bytes, 16) of dst are zero-filled (src_bytes in 0..16).
TP_DEVICE void cp_async_16(uint32_t dst, const void* src, int src_bytes = 16) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes)
               : "memory");
}

/// cp.async.ca.shared.global [dst], [src], Bytes, src_bytes: 4-, 8- or 16-byte copy through L1,
/// for rows that are not 16-byte aligned; zero-fill as above.
template <int Bytes>
TP_DEVICE void cp_async_ca(uint32_t dst, const void* src, int src_bytes = Bytes) {
  static_assert(Bytes == 4 || Bytes == 8 || Bytes == 16, "cp.async.ca copies 4, 8 or 16 bytes");
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(dst), "l"(src), "n"(Bytes),
               "r"(src_bytes)
               : "memory");
}

/// cp.async.commit_group: close the group of this thread's cp.async issued since the last commit.
TP_DEVICE void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}

/// cp.async.wait_group N: wait until at most N of this thread's committed groups are pending.
template <int N>
TP_DEVICE void cp_async_wait() {
  static_assert(N >= 0, "cp.async.wait_group takes a non-negative count");
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

/// cp.async.wait_all: wait for every cp.async of this thread (committed or not).
TP_DEVICE void cp_async_wait_all() {
  asm volatile("cp.async.wait_all;" ::: "memory");
}

/// One 16-byte chunk of a tile from global to shared memory, asynchronously where possible:
/// the first `valid` of the chunk's N elements of E bytes come from `g`, the rest of the chunk is
/// zero-filled (tiles read zeros past a tensor's edge). `smem` is 16-byte aligned. The width
/// follows g's address at run time: one 16-byte cp.async.cg, two 8-byte or four 4-byte
/// cp.async.ca (each with its share of the valid bytes as src-size), or, for an address not even
/// 4-byte aligned, plain loads and stores (complete when this returns, so the caller's
/// cp.async wait and barrier order them like the rest). With valid = 0 nothing is read from g.
/// A partial chunk (a row's last elements) takes the plain loads too: cp.async with a src-size
/// short of its width reads only src-size bytes, but compute-sanitizer counts the whole width,
/// past the tensor's end (seen on the H200 at gemm K=523), and one chunk a row costs little.
template <int E, int N>
TP_DEVICE void cp_async_chunk(void* smem, const void* g, int valid) {
  static_assert(E * N == 16, "a chunk is 16 bytes");
  const uint32_t s = smem_u32(smem);
  const int bytes = valid * E;
  const unsigned long long a = reinterpret_cast<unsigned long long>(g);
  const char* gc = static_cast<const char*>(g);
  const bool partial = bytes > 0 && bytes < 16;
  if (!partial && a % 16 == 0) {
    cp_async_16(s, g, bytes);
  } else if (!partial && a % 8 == 0) {
    for (int p = 0; p < 2; ++p) {
      const int b = bytes - 8 * p;
      cp_async_ca<8>(s + 8 * p, b > 0 ? gc + 8 * p : gc, b < 0 ? 0 : (b > 8 ? 8 : b));
    }
  } else if (!partial && a % 4 == 0) {
    for (int p = 0; p < 4; ++p) {
      const int b = bytes - 4 * p;
      cp_async_ca<4>(s + 4 * p, b > 0 ? gc + 4 * p : gc, b < 0 ? 0 : (b > 4 ? 4 : b));
    }
  } else {
    char* d = static_cast<char*>(smem);
    for (int i = 0; i < 16; ++i)
      d[i] = i < bytes ? gc[i] : 0;
  }
}

} // namespace tp::sm80
#endif
