// Element types of tensors and tiles, and the rounding that storing into each one implies.
//
// Conversion rules (the interpreter, host tensors and the CUDA backend all implement these):
//   - f16 / bf16 / fp8: round to nearest even from f32, as the GPU's cvt.rn does. Values compute
//     in f32; a double (host code) is first rounded to f32. fp8 conversions saturate
//     (cvt.rn.satfinite): a finite value beyond the largest finite one, and infinity, become
//     the largest finite value of that sign (e4m3: 448, e5m2: 57344); NaN stays NaN (its bit
//     pattern is not specified). e4m3 has no infinity: S.1111.111 is NaN. e5m2 is IEEE-like
//     (infinity S.11111.00, NaN S.11111.xx with xx != 0).
//   - i32 / i8 / u8 / int4: truncate toward zero and saturate to the type's range; NaN -> 0.
//     Integer values saturate too (300 stored into u8 is 255, -1 is 0): mask first (x & 0xff)
//     to wrap.
//   - int4 is packed: two signed 4-bit elements per byte, element 2k in the low nibble
//     (bits [3:0]) of byte k, element 2k+1 in the high nibble. An element reads as -8..7.
//     int4 is for global tensors that kernels read (a quantized weight): element loads and
//     copies into tiles of another dtype. To write one, or to read the bytes yourself, declare
//     the tensor u8 and use pack_int4 / unpack_int4 (expr.h).
//   - i8 / u8 / int4 values compute as i32; fp8 values compute as f32.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace tp {

// Values are stable (they may be serialized): new types are appended.
enum class DType : uint8_t { f32, f16, bf16, i32, boolean, i8, u8, int4, fp8_e4m3, fp8_e5m2 };

inline constexpr DType f32 = DType::f32;
inline constexpr DType f16 = DType::f16;
inline constexpr DType bf16 = DType::bf16;
inline constexpr DType i32 = DType::i32;
inline constexpr DType i8 = DType::i8;
inline constexpr DType u8 = DType::u8;
inline constexpr DType int4 = DType::int4;
inline constexpr DType fp8_e4m3 = DType::fp8_e4m3;
inline constexpr DType fp8_e5m2 = DType::fp8_e5m2;

/// Bits one element occupies in memory (4 for int4).
int dtype_bits(DType t);
/// Bytes one element occupies in memory; int4 gives 1, the byte that holds the element (two
/// share it): size buffers with dtype_bits or storage_bytes.
int dtype_bytes(DType t);
/// Bytes `n` elements occupy (int4: (n + 1) / 2).
int64_t storage_bytes(DType t, int64_t n);
/// Canonical lower-case name: "f32", "f16", "bf16", "i32", "bool", "i8", "u8", "int4",
/// "fp8_e4m3", "fp8_e5m2".
const char* dtype_name(DType t);
/// The name CUDA C++ uses for the type ("float", "__nv_bfloat16", "__nv_fp8_e4m3", ...).
const char* dtype_cuda_name(DType t);
/// Accepts the canonical names and common aliases ("float32", "int8", "uint8", "i4",
/// "float8_e4m3fn", "e4m3", ...).
std::optional<DType> parse_dtype(std::string_view name);
inline bool is_float(DType t) {
  return t == DType::f32 || t == DType::f16 || t == DType::bf16 || t == DType::fp8_e4m3 ||
         t == DType::fp8_e5m2;
}
/// Integer element types (bool is not one).
inline bool is_int(DType t) {
  return t == DType::i32 || t == DType::i8 || t == DType::u8 || t == DType::int4;
}
/// The range of an integer type ([-8, 7] for int4).
int64_t int_min(DType t);
int64_t int_max(DType t);

/// Round a value to what storing it into an element of type `t` keeps (the rules above).
double round_to(DType t, double v);

/// Bit-level conversions used by host tensors (round to nearest even; fp8 saturating).
uint16_t float_to_half_bits(float f);
float half_bits_to_float(uint16_t h);
uint16_t float_to_bf16_bits(float f);
float bf16_bits_to_float(uint16_t b);
uint8_t float_to_fp8_bits(DType t, float f); // t: fp8_e4m3 or fp8_e5m2
float fp8_bits_to_float(DType t, uint8_t b);

} // namespace tp
