// Element conversions of generated code: every load becomes a float (or int), every store
// rounds to its type; saturating casts to the 8- and 4-bit integer types.
#pragma once

#include "defs.cuh"
#include "types.cuh"

#if TP_CUDA
namespace tp::cg {

TP_DEVICE float f(float x) {
  return x;
}
TP_DEVICE float f(bf16 x) {
  return to_float(x);
}
TP_DEVICE float f(half x) {
  return to_float(x);
}
TP_DEVICE float f(fp8e4m3 x) {
  return to_float(x);
}
TP_DEVICE float f(fp8e5m2 x) {
  return to_float(x);
}
TP_DEVICE int f(int x) {
  return x;
}
template <typename T>
TP_DEVICE T as(float x);
template <>
TP_DEVICE float as<float>(float x) {
  return x;
}
template <>
TP_DEVICE bf16 as<bf16>(float x) {
  return to_bf16(x);
}
template <>
TP_DEVICE half as<half>(float x) {
  return to_half(x);
}
template <>
TP_DEVICE fp8e4m3 as<fp8e4m3>(float x) {
  return to_fp8e4m3(x);
}
template <>
TP_DEVICE fp8e5m2 as<fp8e5m2>(float x) {
  return to_fp8e5m2(x);
}
template <>
TP_DEVICE int as<int>(float x) {
  return static_cast<int>(x);
}

// Stores and casts into 8- and 4-bit integers saturate to the type's range; from a float they
// truncate toward zero first and NaN gives 0 (the rule of tilepilot/dtype.h).
TP_DEVICE int sat(int x, int lo, int hi) {
  return x < lo ? lo : x > hi ? hi : x;
}
TP_DEVICE int sat(float x, int lo, int hi) {
  return x != x ? 0 : x <= lo ? lo : x >= hi ? hi : static_cast<int>(x);
}
TP_DEVICE signed char to_i8(int x) {
  return static_cast<signed char>(sat(x, -128, 127));
}
TP_DEVICE signed char to_i8(float x) {
  return static_cast<signed char>(sat(x, -128, 127));
}
TP_DEVICE unsigned char to_u8(int x) {
  return static_cast<unsigned char>(sat(x, 0, 255));
}
TP_DEVICE unsigned char to_u8(float x) {
  return static_cast<unsigned char>(sat(x, 0, 255));
}
/// A cast to int4 (the value, -8..7; int4 is never stored by a kernel).
TP_DEVICE int to_int4(int x) {
  return sat(x, -8, 7);
}
TP_DEVICE int to_int4(float x) {
  return sat(x, -8, 7);
}
/// Element i of a packed int4 tensor: the low nibble of byte i / 2 for even i, else the high
/// one, sign-extended.
TP_DEVICE int int4_at(const unsigned char* p, int i) {
  const int n = (p[i >> 1] >> ((i & 1) * 4)) & 0xf;
  return (n ^ 8) - 8;
}
/// Rounds through T and back (a cast to a 16-bit type inside an f32 expression).
template <typename T>
TP_DEVICE float round_as(float x) {
  return f(as<T>(x));
}

TP_DEVICE float inf() {
  return __int_as_float(0x7f800000);
}

} // namespace tp::cg
#endif
