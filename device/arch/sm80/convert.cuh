// PTX wrappers for numeric conversions and bit casts (sm_80+), on raw bit patterns.
//
// The typed API (tp::bf16, tp::half, to_float, to_bf16, ...) lives in types.cuh and calls these.
// Packed conversions put their FIRST float operand in the UPPER half of the result (PTX rule for
// cvt.rn.{bf16x2,f16x2}.f32 d, a, b: a -> d[31:16], b -> d[15:0]); the wrappers below take
// (hi, lo) in that order on purpose and are wrapped by lo-first helpers in types.cuh.
#pragma once

#include "defs.cuh"

#if TP_CUDA
namespace tp::sm80 {

/// cvt.rn.bf16.f32 d, a: d (b16) = round-to-nearest-even bf16 of a (f32).
TP_DEVICE uint16_t cvt_rn_bf16_f32(float a) {
  uint16_t d;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(d) : "f"(a));
  return d;
}

/// cvt.rn.f16.f32 d, a: d (b16) = round-to-nearest-even f16 of a (f32).
TP_DEVICE uint16_t cvt_rn_f16_f32(float a) {
  uint16_t d;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(d) : "f"(a));
  return d;
}

/// cvt.f32.f16 d, a: d (f32) = exact f32 value of a (f16 bits).
TP_DEVICE float cvt_f32_f16(uint16_t a) {
  float d;
  asm("cvt.f32.f16 %0, %1;" : "=f"(d) : "h"(a));
  return d;
}

/// cvt.rn.bf16x2.f32 d, hi, lo: d[31:16] = bf16(hi), d[15:0] = bf16(lo), round-to-nearest-even.
TP_DEVICE uint32_t cvt_rn_bf16x2_f32(float hi, float lo) {
  uint32_t d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}

/// cvt.rn.f16x2.f32 d, hi, lo: d[31:16] = f16(hi), d[15:0] = f16(lo), round-to-nearest-even.
TP_DEVICE uint32_t cvt_rn_f16x2_f32(float hi, float lo) {
  uint32_t d;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}

/// mov.b32 d, a: reinterpret 32 bits (u32 a) as f32 d. bf16 -> f32 is bits_as_float(b << 16),
/// exact and valid on sm_80 (cvt.f32.bf16 needs sm_90).
TP_DEVICE float bits_as_float(uint32_t a) {
  float d;
  asm("mov.b32 %0, %1;" : "=f"(d) : "r"(a));
  return d;
}

/// mov.b32 d, a: reinterpret f32 a as u32 d.
TP_DEVICE uint32_t float_as_bits(float a) {
  uint32_t d;
  asm("mov.b32 %0, %1;" : "=r"(d) : "f"(a));
  return d;
}

/// fma.rn.bf16x2 d, a, b, c: per half, a * b + c rounded once to bf16 (subnormals kept).
TP_DEVICE uint32_t fma_rn_bf16x2(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

/// fma.rn.f16x2 d, a, b, c: per half, a * b + c rounded once to f16 (subnormals kept).
TP_DEVICE uint32_t fma_rn_f16x2(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

/// prmt.b32 d, a, b, sel: byte k of d is byte (sel >> 4k) & 7 of a (bytes 0-3)
/// followed by b (bytes 4-7).
/// The builtin, not inline asm: the compiler knows what it computes, so it merges equal ones.
TP_DEVICE uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  return __byte_perm(a, b, sel);
}

} // namespace tp::sm80
#endif
