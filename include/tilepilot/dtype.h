// Element types of tensors and tiles, and the rounding that storing into each one implies.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace tp {

enum class DType : uint8_t { f32, f16, bf16, i32, boolean };

inline constexpr DType f32 = DType::f32;
inline constexpr DType f16 = DType::f16;
inline constexpr DType bf16 = DType::bf16;
inline constexpr DType i32 = DType::i32;

/// Bytes one element occupies in memory.
int dtype_bytes(DType t);
/// Canonical lower-case name: "f32", "f16", "bf16", "i32", "bool".
const char* dtype_name(DType t);
/// The name CUDA C++ uses for the type ("float", "__nv_bfloat16", ...).
const char* dtype_cuda_name(DType t);
std::optional<DType> parse_dtype(std::string_view name);
inline bool is_float(DType t) {
  return t == DType::f32 || t == DType::f16 || t == DType::bf16;
}

/// Round a value to what storing it into an element of type `t` keeps: round-to-nearest-even
/// for f16/bf16 (as the GPU's cvt.rn does), float for f32, truncation toward zero for i32.
double round_to(DType t, double v);

/// Bit-level conversions used by host tensors (IEEE binary16 and bfloat16, round to nearest even).
uint16_t float_to_half_bits(float f);
float half_bits_to_float(uint16_t h);
uint16_t float_to_bf16_bits(float f);
float bf16_bits_to_float(uint16_t b);

} // namespace tp
