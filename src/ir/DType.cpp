// dtype names and the rounding of stores: IEEE binary16, bfloat16 and OCP fp8 (e4m3, e5m2),
// round to nearest even, fp8 saturating; integers truncate and saturate.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "tilepilot/dtype.h"

namespace tp {

int dtype_bits(DType t) {
  switch (t) {
  case DType::f32:
    return 32;
  case DType::f16:
    return 16;
  case DType::bf16:
    return 16;
  case DType::i32:
    return 32;
  case DType::boolean:
    return 8;
  case DType::i8:
    return 8;
  case DType::u8:
    return 8;
  case DType::int4:
    return 4;
  case DType::fp8_e4m3:
    return 8;
  case DType::fp8_e5m2:
    return 8;
  }
  return 0;
}

int dtype_bytes(DType t) {
  return t == DType::int4 ? 1 : dtype_bits(t) / 8;
}

int64_t storage_bytes(DType t, int64_t n) {
  return (n * dtype_bits(t) + 7) / 8;
}

int64_t int_min(DType t) {
  switch (t) {
  case DType::i8:
    return -128;
  case DType::u8:
    return 0;
  case DType::int4:
    return -8;
  case DType::boolean:
    return 0;
  default:
    return std::numeric_limits<int32_t>::min();
  }
}

int64_t int_max(DType t) {
  switch (t) {
  case DType::i8:
    return 127;
  case DType::u8:
    return 255;
  case DType::int4:
    return 7;
  case DType::boolean:
    return 1;
  default:
    return std::numeric_limits<int32_t>::max();
  }
}

const char* dtype_name(DType t) {
  switch (t) {
  case DType::f32: return "f32";
  case DType::f16: return "f16";
  case DType::bf16: return "bf16";
  case DType::i32: return "i32";
  case DType::boolean: return "bool";
  case DType::i8:
    return "i8";
  case DType::u8:
    return "u8";
  case DType::int4:
    return "int4";
  case DType::fp8_e4m3:
    return "fp8_e4m3";
  case DType::fp8_e5m2:
    return "fp8_e5m2";
  }
  return "?";
}

const char* dtype_cuda_name(DType t) {
  switch (t) {
  case DType::f32: return "float";
  case DType::f16: return "__half";
  case DType::bf16: return "__nv_bfloat16";
  case DType::i32: return "int";
  case DType::boolean: return "bool";
  case DType::i8:
    return "signed char";
  case DType::u8:
    return "unsigned char";
  case DType::int4:
    return "unsigned char"; // two elements per byte
  case DType::fp8_e4m3:
    return "__nv_fp8_e4m3";
  case DType::fp8_e5m2:
    return "__nv_fp8_e5m2";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view n) {
  if (n == "f32" || n == "float32") return DType::f32;
  if (n == "f16" || n == "float16" || n == "fp16") return DType::f16;
  if (n == "bf16" || n == "bfloat16") return DType::bf16;
  if (n == "i32" || n == "int32") return DType::i32;
  if (n == "bool") return DType::boolean;
  if (n == "i8" || n == "int8") return DType::i8;
  if (n == "u8" || n == "uint8") return DType::u8;
  if (n == "int4" || n == "i4") return DType::int4;
  if (n == "fp8_e4m3" || n == "e4m3" || n == "float8_e4m3fn" || n == "float8_e4m3")
    return DType::fp8_e4m3;
  if (n == "fp8_e5m2" || n == "e5m2" || n == "float8_e5m2") return DType::fp8_e5m2;
  return std::nullopt;
}

uint16_t float_to_bf16_bits(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40); // qNaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float bf16_bits_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

uint16_t float_to_half_bits(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u); // NaN
  if (absu >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u); // rounds to >= 65520: inf
  if (absu < 0x38800000u) {
    // Subnormal half (or zero): value = m * 2^-24, round the f32 value at that granularity.
    float a = std::bit_cast<float>(absu);
    float scaled = a * 16777216.0f; // exact: a * 2^24
    uint32_t m = static_cast<uint32_t>(std::nearbyint(scaled)); // current mode: nearest even
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t exp = ((absu >> 23) - 127 + 15);
  uint32_t mant = absu & 0x7fffffu;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h; // may carry into exponent: fine
  return static_cast<uint16_t>(sign | h);
}

float half_bits_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

namespace {

/// An OCP fp8 format: `mant` mantissa bits, smallest normal exponent `emin`, largest finite
/// value `max` (bits `max_bits` without the sign).
struct Fp8Format {
  int mant;
  int emin;
  float max;
  uint8_t max_bits;
};
Fp8Format fp8_format(DType t) {
  if (t == DType::fp8_e4m3) return {3, -6, 448.0f, 0x7e};
  return {2, -14, 57344.0f, 0x7b};
}

} // namespace

uint8_t float_to_fp8_bits(DType t, float f) {
  const Fp8Format F = fp8_format(t);
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  if (std::isnan(f)) return sign | 0x7f; // NaN in both formats
  float a = std::fabs(f);
  if (a >= F.max) return sign | F.max_bits; // satfinite: infinity too
  if (a == 0) return sign;
  int ex;
  std::frexp(a, &ex);
  int e = std::max(ex - 1, F.emin); // the binade's exponent; subnormals share emin's quantum
  // a / quantum is exact (a power of two); nearbyint rounds ties to even in the default mode.
  double r = std::nearbyint(std::ldexp(static_cast<double>(a), F.mant - e));
  // Normal: exponent field e - emin + 1, mantissa r - 2^mant; a carry out of the mantissa
  // (r == 2^(mant+1)) or into the smallest normal (subnormal r == 2^mant) lands right.
  return sign | static_cast<uint8_t>(((e - F.emin) << F.mant) + static_cast<int>(r));
}

float fp8_bits_to_float(DType t, uint8_t b) {
  const Fp8Format F = fp8_format(t);
  const bool neg = b & 0x80;
  const int E = (b & 0x7f) >> F.mant, M = b & ((1 << F.mant) - 1);
  float v;
  if (t == DType::fp8_e4m3 && (b & 0x7f) == 0x7f) {
    v = std::numeric_limits<float>::quiet_NaN();
  } else if (t == DType::fp8_e5m2 && E == 31) {
    v = M == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  } else if (E == 0) {
    v = std::ldexp(static_cast<float>(M), F.emin - F.mant);
  } else {
    v = std::ldexp(static_cast<float>((1 << F.mant) + M), E - 1 + F.emin - F.mant);
  }
  return neg ? -v : v;
}

double round_to(DType t, double v) {
  switch (t) {
  case DType::f32: return static_cast<float>(v);
  case DType::f16: return half_bits_to_float(float_to_half_bits(static_cast<float>(v)));
  case DType::bf16: return bf16_bits_to_float(float_to_bf16_bits(static_cast<float>(v)));
  case DType::i32:
    if (std::isnan(v)) return 0;
    return static_cast<double>(static_cast<int32_t>(
        std::fmax(std::fmin(std::trunc(v), 2147483647.0), -2147483648.0)));
  case DType::boolean: return v != 0 ? 1 : 0;
  case DType::i8:
  case DType::u8:
  case DType::int4:
    if (std::isnan(v)) return 0;
    return std::fmax(std::fmin(std::trunc(v), static_cast<double>(int_max(t))),
                     static_cast<double>(int_min(t)));
  case DType::fp8_e4m3:
  case DType::fp8_e5m2:
    return fp8_bits_to_float(t, float_to_fp8_bits(t, static_cast<float>(v)));
  }
  return v;
}

} // namespace tp
