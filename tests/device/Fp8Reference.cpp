// The host library's fp8 conversions (tilepilot/dtype.h) behind names that do not clash with
// the device library's types (tp::bf16 is a dtype constant there and a struct here), so that
// TypesTest can compare the two implementations.
#include <cstdint>

#include "tilepilot/dtype.h"

uint8_t host_fp8_bits(bool e4m3, float f) {
  return tp::float_to_fp8_bits(e4m3 ? tp::DType::fp8_e4m3 : tp::DType::fp8_e5m2, f);
}
float host_fp8_value(bool e4m3, uint8_t b) {
  return tp::fp8_bits_to_float(e4m3 ? tp::DType::fp8_e4m3 : tp::DType::fp8_e5m2, b);
}
