// PTX wrappers for fast f32 math: ex2, rcp, rsqrt (approximate, flush-to-zero), full-range
// division, max, min.
//
// Per-thread instructions, valid from sm_80 on. types.cuh re-exports them as tp::fast_exp2 etc.
#pragma once

#include "defs.cuh"

#if TP_CUDA
namespace tp::sm80 {

/// ex2.approx.ftz.f32 d, a: d = 2^a (max rel. error 2^-22; subnormal inputs/outputs flush to 0).
TP_DEVICE float ex2_approx_ftz(float a) {
  float d;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(d) : "f"(a));
  return d;
}

/// rcp.approx.ftz.f32 d, a: d = 1/a (approximate, max 1 ulp).
TP_DEVICE float rcp_approx_ftz(float a) {
  float d;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(d) : "f"(a));
  return d;
}

/// div.full.f32 d, a, b: d = a / b within 2 ulp over the whole range, without the branch to
/// a slow path that the IEEE quotient (div.rn) takes: ptxas cannot move work across that branch,
/// so element-wise code with a quotient per element ran one element after another.
TP_DEVICE float div_full(float a, float b) {
  float d;
  asm("div.full.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
}

/// rsqrt.approx.ftz.f32 d, a: d = 1/sqrt(a) (approximate).
TP_DEVICE float rsqrt_approx_ftz(float a) {
  float d;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(d) : "f"(a));
  return d;
}

/// max.f32 d, a, b: d = max(a, b); if exactly one input is NaN the other is returned.
TP_DEVICE float max_f32(float a, float b) {
  float d;
  asm("max.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
}

/// min.f32 d, a, b: d = min(a, b); if exactly one input is NaN the other is returned.
TP_DEVICE float min_f32(float a, float b) {
  float d;
  asm("min.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
}

} // namespace tp::sm80
#endif
