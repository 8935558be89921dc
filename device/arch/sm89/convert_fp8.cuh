// PTX wrappers for fp8 conversions (sm_89+), on raw bit patterns.
//
// The typed API (tp::fp8e4m3, tp::fp8e5m2, to_float, to_fp8e4m3, ...) lives in types.cuh, with
// an integer-arithmetic fallback that rounds identically for sm_80 and the host. As with the
// 16-bit packed conversions, cvt puts its FIRST f32 operand in the UPPER byte: the wrappers
// take (hi, lo) in that order.
#pragma once

#include "defs.cuh"

#if TP_CUDA
namespace tp::sm89 {

/// cvt.rn.satfinite.e4m3x2.f32 d, hi, lo: d[15:8] = e4m3(hi), d[7:0] = e4m3(lo); round to
/// nearest even, |x| > 448 (and infinity) -> +-448, NaN -> NaN.
TP_DEVICE uint16_t cvt_rn_satfinite_e4m3x2_f32(float hi, float lo) {
  uint16_t d;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(d) : "f"(hi), "f"(lo));
  return d;
}

/// cvt.rn.satfinite.e5m2x2.f32 d, hi, lo: as above for e5m2 (largest finite 57344).
TP_DEVICE uint16_t cvt_rn_satfinite_e5m2x2_f32(float hi, float lo) {
  uint16_t d;
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(d) : "f"(hi), "f"(lo));
  return d;
}

/// cvt.rn.f16x2.e4m3x2 d, a: d[31:16] = f16(a[15:8]), d[15:0] = f16(a[7:0]), exact.
TP_DEVICE uint32_t cvt_rn_f16x2_e4m3x2(uint16_t a) {
  uint32_t d;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(d) : "h"(a));
  return d;
}

/// cvt.rn.f16x2.e5m2x2 d, a: d[31:16] = f16(a[15:8]), d[15:0] = f16(a[7:0]), exact.
TP_DEVICE uint32_t cvt_rn_f16x2_e5m2x2(uint16_t a) {
  uint32_t d;
  asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(d) : "h"(a));
  return d;
}

} // namespace tp::sm89
#endif
