// HostTensor element access in the dtype's own bit layout.
#include <cstring>
#include <limits>
#include <random>

#include "tilepilot/error.h"
#include "tilepilot/tensor.h"

namespace tp {

HostTensor::HostTensor(DType dtype, std::vector<int64_t> shape)
    : dtype_(dtype), shape_(std::move(shape)) {
  numel_ = 1;
  for (int64_t e : shape_) {
    internal_assert(e >= 0) << "negative extent";
    numel_ *= e;
  }
  data_.assign(static_cast<size_t>(numel_) * dtype_bytes(dtype_), 0);
}

double HostTensor::get(int64_t i) const {
  const uint8_t* p = data_.data() + i * dtype_bytes(dtype_);
  switch (dtype_) {
  case DType::f32: {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  case DType::f16: {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return half_bits_to_float(h);
  }
  case DType::bf16: {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return bf16_bits_to_float(h);
  }
  case DType::i32: {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  case DType::boolean: return *p ? 1 : 0;
  }
  return 0;
}

void HostTensor::set(int64_t i, double v) {
  uint8_t* p = data_.data() + i * dtype_bytes(dtype_);
  switch (dtype_) {
  case DType::f32: {
    float f = static_cast<float>(v);
    std::memcpy(p, &f, 4);
    return;
  }
  case DType::f16: {
    uint16_t h = float_to_half_bits(static_cast<float>(v));
    std::memcpy(p, &h, 2);
    return;
  }
  case DType::bf16: {
    uint16_t h = float_to_bf16_bits(static_cast<float>(v));
    std::memcpy(p, &h, 2);
    return;
  }
  case DType::i32: {
    int32_t x = static_cast<int32_t>(round_to(DType::i32, v));
    std::memcpy(p, &x, 4);
    return;
  }
  case DType::boolean: *p = v != 0; return;
  }
}

void HostTensor::fill_random(uint64_t seed, double lo, double hi) {
  std::mt19937_64 rng(seed);
  if (dtype_ == DType::i32) {
    std::uniform_int_distribution<int64_t> d(static_cast<int64_t>(lo), static_cast<int64_t>(hi));
    for (int64_t i = 0; i < numel_; ++i) set(i, static_cast<double>(d(rng)));
    return;
  }
  std::uniform_real_distribution<double> d(lo, hi);
  for (int64_t i = 0; i < numel_; ++i) set(i, d(rng));
}

void HostTensor::poison() {
  double v = dtype_ == DType::i32 ? static_cast<double>(std::numeric_limits<int32_t>::min())
                                  : std::numeric_limits<double>::quiet_NaN();
  fill(v);
}

void HostTensor::fill(double v) {
  for (int64_t i = 0; i < numel_; ++i) set(i, v);
}

std::string HostTensor::shape_str() const {
  std::string s = "[";
  for (size_t i = 0; i < shape_.size(); ++i) s += (i ? ", " : "") + std::to_string(shape_[i]);
  return s + "]";
}

} // namespace tp
