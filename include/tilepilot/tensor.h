// Host tensors: dense row-major arrays in their element type's exact bit layout (bf16 as 16-bit
// words, fp8 as bytes, int4 two to a byte with the even element in the low nibble), as a GPU
// kernel would see them. Used for interpreter arguments, references and checks.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tilepilot/dtype.h"

namespace tp {

class HostTensor {
public:
  HostTensor() = default;
  HostTensor(DType dtype, std::vector<int64_t> shape);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return numel_; }
  size_t bytes() const { return data_.size(); }
  void* data() { return data_.data(); }
  const void* data() const { return data_.data(); }

  /// Element `i` (flat row-major index) as a double, exactly.
  double get(int64_t i) const;
  /// Stores `v` into element `i`, rounded to the dtype.
  void set(int64_t i, double v);

  /// Fills with uniform random values in [lo, hi), deterministic per seed. Integer dtypes draw
  /// the integers of [lo, hi) that the dtype holds (a user error when there are none).
  void fill_random(uint64_t seed, double lo = -1.0, double hi = 1.0);
  /// Fills every element with a value no kernel should leave: NaN for floats, the type's
  /// minimum for signed integers (INT32_MIN, -128, -8), 255 for u8.
  void poison();
  void fill(double v);
  std::string shape_str() const;

private:
  DType dtype_ = DType::f32;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  std::vector<uint8_t> data_;
};

} // namespace tp
