// dtype names and the rounding of stores: IEEE binary16 and bfloat16, round to nearest even.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "tilepilot/dtype.h"

namespace tp {

int dtype_bytes(DType t) {
  switch (t) {
  case DType::f32: return 4;
  case DType::f16: return 2;
  case DType::bf16: return 2;
  case DType::i32: return 4;
  case DType::boolean: return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
  case DType::f32: return "f32";
  case DType::f16: return "f16";
  case DType::bf16: return "bf16";
  case DType::i32: return "i32";
  case DType::boolean: return "bool";
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
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view n) {
  if (n == "f32" || n == "float32") return DType::f32;
  if (n == "f16" || n == "float16" || n == "fp16") return DType::f16;
  if (n == "bf16" || n == "bfloat16") return DType::bf16;
  if (n == "i32" || n == "int32") return DType::i32;
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
  }
  return v;
}

} // namespace tp
