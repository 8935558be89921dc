// PTX wrappers for setmaxnreg (sm_90a): move registers between warpgroups of a CTA, as in
// warp-specialized kernels (producers release, consumers claim).
//
// All warps of the warpgroup execute it together (tp::warpgroup). N is the new per-thread
// register count: 24..256, a multiple of 8. The kernel's launch register count (e.g. from
// __launch_bounds__ / --maxrregcount) is the starting point.
#pragma once

#include "defs.cuh"

#if TP_CUDA
namespace tp::warpgroup {

/// setmaxnreg.inc.sync.aligned.u32 N: raise this warpgroup's per-thread register limit to N
/// (blocks until the CTA's pool has the registers).
template <int N>
TP_DEVICE void setmaxnreg_inc() {
  static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg takes 24..256, a multiple of 8");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}

/// setmaxnreg.dec.sync.aligned.u32 N: lower this warpgroup's per-thread register limit to N,
/// returning the rest to the CTA's pool.
template <int N>
TP_DEVICE void setmaxnreg_dec() {
  static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg takes 24..256, a multiple of 8");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}

} // namespace tp::warpgroup
#endif
