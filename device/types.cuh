// TilePilot device library: element types, conversions and per-thread math.
//
// fp8e4m3 / fp8e5m2 are the OCP fp8 formats as bytes (struct around the bits): conversions
// from f32 round to nearest even and saturate (cvt.rn.satfinite: |x| beyond the largest finite
// value, and infinity, give +-448 / +-57344; NaN stays NaN); to f32 is exact. On sm_89+ they are
// cvt instructions (arch/sm89/convert_fp8.cuh); elsewhere, and on the host, integer arithmetic
// that rounds identically.
// bf16 / half are 16-bit storage types (a struct around the raw bits, no arithmetic); bf16x2 /
// half2x pack two of them in 32 bits, element 0 in bits [15:0] (the lower address in memory and
// what mma/wgmma call the "low" element). Conversions round to nearest even. On the device they
// are single PTX cvt instructions (arch/sm80/convert.cuh); on the host the same rounding is done
// in integer arithmetic, so host references can round exactly like the GPU.
#pragma once

#include "arch/sm80/convert.cuh"
#include "arch/sm80/math.cuh"
#include "arch/sm80/smem.cuh"
#include "arch/sm80/sync.cuh"
#include "defs.cuh"
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 890
#include "arch/sm89/convert_fp8.cuh"
#endif

#if !TP_DEVICE_PASS
#include <cstring>
#endif

namespace tp {

struct bf16 {
  uint16_t bits;
};
struct half {
  uint16_t bits;
};
struct bf16x2 {
  uint32_t bits; // element 0 in [15:0], element 1 in [31:16]
};
struct half2x {
  uint32_t bits; // element 0 in [15:0], element 1 in [31:16]
};
struct fp8e4m3 {
  uint8_t bits; // S.EEEE.MMM, bias 7; S.1111.111 is NaN; no infinity
};
struct fp8e5m2 {
  uint8_t bits; // S.EEEEE.MM, bias 15; S.11111.00 is infinity, S.11111.xx NaN
};

#if !TP_DEVICE_PASS
namespace host {
inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
/// Round-to-nearest-even f32 -> bf16 bits; NaN -> 0x7fff (the canonical NaN PTX cvt produces).
inline uint16_t f32_to_bf16_bits(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
/// Round-to-nearest-even f32 -> f16 bits, with f16 subnormals; overflow -> inf; NaN -> 0x7fff.
inline uint16_t f32_to_f16_bits(float f) {
  uint32_t u = float_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return 0x7fff;
  if (u >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u); // >= 65520 -> inf
  if (u >= 0x38800000u) {                                             // normal f16 (>= 2^-14)
    u += 0xfffu + ((u >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((u >> 13) - 0x1c000u));
  }
  const int e = static_cast<int>(u >> 23); // f16 subnormal: round(value / 2^-24)
  const int s = 126 - e;
  if (e == 0 || s > 24) return static_cast<uint16_t>(sign);
  const uint32_t mant = (u & 0x7fffffu) | 0x800000u;
  uint32_t q = mant >> s;
  const uint32_t r = mant & ((1u << s) - 1u), halfway = 1u << (s - 1);
  if (r > halfway || (r == halfway && (q & 1u))) ++q;
  return static_cast<uint16_t>(sign | q);
}
inline float f16_bits_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return bits_float(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    const float v = static_cast<float>(m) * (1.0f / 16777216.0f); // m * 2^-24, exact
    return sign ? -v : v;
  }
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}
} // namespace host
#endif

TP_HOST_DEVICE uint32_t f32_bits(float f) {
#if TP_DEVICE_PASS
  return sm80::float_as_bits(f);
#else
  return host::float_bits(f);
#endif
}
TP_HOST_DEVICE float bits_f32(uint32_t u) {
#if TP_DEVICE_PASS
  return sm80::bits_as_float(u);
#else
  return host::bits_float(u);
#endif
}

namespace soft {
/// f32 -> fp8 bits in integer arithmetic: round to nearest even, saturating, NaN -> 0x7f|sign.
/// `Mant` mantissa bits, smallest normal exponent `Emin`, largest finite value's f32 bits
/// `MaxF32` and fp8 bits `MaxBits`.
template <int Mant, int Emin, uint32_t MaxF32, uint32_t MaxBits>
TP_HOST_DEVICE uint8_t f32_to_fp8(float f) {
  const uint32_t u = f32_bits(f);
  const uint32_t sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);
  if (a >= MaxF32) return static_cast<uint8_t>(sign | MaxBits);
  if (a < 0x00800000u) return static_cast<uint8_t>(sign); // f32 subnormals round to 0
  const int e = static_cast<int>(a >> 23) - 127;
  const uint32_t m = (a & 0x7fffffu) | 0x800000u; // value = m * 2^(e - 23)
  const int shift = 23 - Mant + (e < Emin ? Emin - e : 0);
  if (shift > 24) return static_cast<uint8_t>(sign); // below half the smallest subnormal
  uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
  if (rem > halfway || (rem == halfway && (q & 1u))) ++q;
  // Normal: exponent field e - Emin + 1 and mantissa q - 2^Mant; a carry (q = 2^(Mant+1), or a
  // subnormal rounding up to 2^Mant) moves into the exponent field by itself.
  const int eb = e < Emin ? 0 : e - Emin;
  return static_cast<uint8_t>(sign | ((static_cast<uint32_t>(eb) << Mant) + q));
}
/// fp8 bits -> f32, exact.
template <int Mant, int Emin, bool E4M3>
TP_HOST_DEVICE float fp8_to_f32(uint8_t b) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t E = (b & 0x7fu) >> Mant, M = b & ((1u << Mant) - 1u);
  if (E4M3 ? (b & 0x7fu) == 0x7fu : E == 31u)
    return bits_f32(sign | 0x7f800000u | (E4M3 || M ? 0x400000u : 0u));
  if (E == 0) {
    const float v =
        static_cast<float>(M) * bits_f32(static_cast<uint32_t>(127 + Emin - Mant) << 23);
    return sign ? -v : v;
  }
  return bits_f32(sign | ((E - 1u + static_cast<uint32_t>(127 + Emin)) << 23) | (M << (23 - Mant)));
}
} // namespace soft

TP_HOST_DEVICE float to_float(bf16 x) {
#if TP_DEVICE_PASS
  return sm80::bits_as_float(static_cast<uint32_t>(x.bits) << 16);
#else
  return host::bits_float(static_cast<uint32_t>(x.bits) << 16);
#endif
}
TP_HOST_DEVICE float to_float(half x) {
#if TP_DEVICE_PASS
  return sm80::cvt_f32_f16(x.bits);
#else
  return host::f16_bits_to_f32(x.bits);
#endif
}
TP_HOST_DEVICE bf16 to_bf16(float x) {
#if TP_DEVICE_PASS
  return bf16{sm80::cvt_rn_bf16_f32(x)};
#else
  return bf16{host::f32_to_bf16_bits(x)};
#endif
}
TP_HOST_DEVICE half to_half(float x) {
#if TP_DEVICE_PASS
  return half{sm80::cvt_rn_f16_f32(x)};
#else
  return half{host::f32_to_f16_bits(x)};
#endif
}
TP_HOST_DEVICE fp8e4m3 to_fp8e4m3(float x) {
#if TP_DEVICE_PASS && __CUDA_ARCH__ >= 890
  return fp8e4m3{static_cast<uint8_t>(sm89::cvt_rn_satfinite_e4m3x2_f32(0.0f, x))};
#else
  return fp8e4m3{soft::f32_to_fp8<3, -6, 0x43e00000u, 0x7eu>(x)};  // 448
#endif
}
TP_HOST_DEVICE fp8e5m2 to_fp8e5m2(float x) {
#if TP_DEVICE_PASS && __CUDA_ARCH__ >= 890
  return fp8e5m2{static_cast<uint8_t>(sm89::cvt_rn_satfinite_e5m2x2_f32(0.0f, x))};
#else
  return fp8e5m2{soft::f32_to_fp8<2, -14, 0x47600000u, 0x7bu>(x)}; // 57344
#endif
}
TP_HOST_DEVICE float to_float(fp8e4m3 x) {
#if TP_DEVICE_PASS && __CUDA_ARCH__ >= 890
  return sm80::cvt_f32_f16(static_cast<uint16_t>(sm89::cvt_rn_f16x2_e4m3x2(x.bits) & 0xffffu));
#else
  return soft::fp8_to_f32<3, -6, true>(x.bits);
#endif
}
TP_HOST_DEVICE float to_float(fp8e5m2 x) {
#if TP_DEVICE_PASS && __CUDA_ARCH__ >= 890
  return sm80::cvt_f32_f16(static_cast<uint16_t>(sm89::cvt_rn_f16x2_e5m2x2(x.bits) & 0xffffu));
#else
  return soft::fp8_to_f32<2, -14, false>(x.bits);
#endif
}

/// Packs (lo, hi) -> element 0 = lo, element 1 = hi, each rounded to nearest even.
TP_HOST_DEVICE bf16x2 to_bf16x2(float lo, float hi) {
#if TP_DEVICE_PASS
  return bf16x2{sm80::cvt_rn_bf16x2_f32(hi, lo)};
#else
  return bf16x2{static_cast<uint32_t>(host::f32_to_bf16_bits(lo)) |
                (static_cast<uint32_t>(host::f32_to_bf16_bits(hi)) << 16)};
#endif
}
TP_HOST_DEVICE half2x to_half2x(float lo, float hi) {
#if TP_DEVICE_PASS
  return half2x{sm80::cvt_rn_f16x2_f32(hi, lo)};
#else
  return half2x{static_cast<uint32_t>(host::f32_to_f16_bits(lo)) |
                (static_cast<uint32_t>(host::f32_to_f16_bits(hi)) << 16)};
#endif
}

TP_HOST_DEVICE bf16x2 pack(bf16 lo, bf16 hi) {
  return bf16x2{static_cast<uint32_t>(lo.bits) | (static_cast<uint32_t>(hi.bits) << 16)};
}
TP_HOST_DEVICE half2x pack(half lo, half hi) {
  return half2x{static_cast<uint32_t>(lo.bits) | (static_cast<uint32_t>(hi.bits) << 16)};
}
TP_HOST_DEVICE bf16 low(bf16x2 v) {
  return bf16{static_cast<uint16_t>(v.bits & 0xffffu)};
}
TP_HOST_DEVICE bf16 high(bf16x2 v) {
  return bf16{static_cast<uint16_t>(v.bits >> 16)};
}
TP_HOST_DEVICE half low(half2x v) {
  return half{static_cast<uint16_t>(v.bits & 0xffffu)};
}
TP_HOST_DEVICE half high(half2x v) {
  return half{static_cast<uint16_t>(v.bits >> 16)};
}

// Named so that `using namespace tp;` cannot make calls ambiguous: NVRTC implicitly declares
// the CUDA math functions (max, min, rsqrt, ...) in the global namespace.
TP_HOST_DEVICE constexpr int imax(int a, int b) {
  return a > b ? a : b;
}
TP_HOST_DEVICE constexpr int imin(int a, int b) {
  return a < b ? a : b;
}

#if TP_CUDA
/// 2^x, approximate (ex2.approx.ftz.f32). exp(x) == fast_exp2(x * 1.4426950408889634f).
TP_DEVICE float fast_exp2(float x) {
  return sm80::ex2_approx_ftz(x);
}
/// 1/x, approximate (rcp.approx.ftz.f32).
TP_DEVICE float fast_rcp(float x) {
  return sm80::rcp_approx_ftz(x);
}
/// a / b within 2 ulp, no slow path (div.full.f32): the quotient of generated f32 code.
TP_DEVICE float fast_div(float a, float b) {
  return sm80::div_full(a, b);
}
/// 1/sqrt(x), approximate (rsqrt.approx.ftz.f32).
TP_DEVICE float fast_rsqrt(float x) {
  return sm80::rsqrt_approx_ftz(x);
}
/// max.f32 / min.f32: a NaN operand loses to a number.
TP_DEVICE float maxf(float a, float b) {
  return sm80::max_f32(a, b);
}
TP_DEVICE float minf(float a, float b) {
  return sm80::min_f32(a, b);
}
#endif

} // namespace tp
