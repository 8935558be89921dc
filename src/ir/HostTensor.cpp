// HostTensor element access in the dtype's own bit layout (int4: two elements per byte, the
// even element in the low nibble).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <thread>
#include <vector>

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
  data_.assign(static_cast<size_t>(storage_bytes(dtype_, numel_)), 0);
}

double HostTensor::get(int64_t i) const {
  if (dtype_ == DType::int4) {
    int nibble = (data_[i / 2] >> (i % 2 * 4)) & 0xf;
    return (nibble ^ 8) - 8; // sign-extend
  }
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
  case DType::boolean:
    return *p ? 1 : 0;
  case DType::i8:
    return static_cast<int8_t>(*p);
  case DType::u8:
    return *p;
  case DType::fp8_e4m3:
  case DType::fp8_e5m2:
    return fp8_bits_to_float(dtype_, *p);
  case DType::int4:
    break; // above
  }
  return 0;
}

void HostTensor::set(int64_t i, double v) {
  if (dtype_ == DType::int4) {
    uint8_t nibble = static_cast<uint8_t>(static_cast<int>(round_to(DType::int4, v)) & 0xf);
    uint8_t& byte = data_[i / 2];
    int shift = i % 2 * 4;
    byte = static_cast<uint8_t>((byte & ~(0xf << shift)) | (nibble << shift));
    return;
  }
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
  case DType::boolean:
    *p = v != 0;
    return;
  case DType::i8:
    *p = static_cast<uint8_t>(static_cast<int8_t>(round_to(DType::i8, v)));
    return;
  case DType::u8:
    *p = static_cast<uint8_t>(round_to(DType::u8, v));
    return;
  case DType::fp8_e4m3:
  case DType::fp8_e5m2:
    *p = float_to_fp8_bits(dtype_, static_cast<float>(v));
    return;
  case DType::int4:
    return; // above
  }
}

namespace {

/// Elements per independently seeded stream of fill_random. Fixed, so the values depend only on
/// the seed and the tensor's size, never on how many threads filled it.
constexpr int64_t kRandomChunk = int64_t(1) << 20;

/// Chunk c's seed: the tensor's own seed for chunk 0 (a tensor of up to kRandomChunk elements
/// gets the same values as a plain mt19937_64 stream), a splitmix64 mix of (seed, c) after it.
uint64_t chunk_seed(uint64_t seed, int64_t c) {
  if (c == 0) return seed;
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(c + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// Runs fill(first, last, chunk) over [0, n) in kRandomChunk pieces, on several threads when
/// there are several pieces: a pilot's largest inputs (a 32k-token KV cache is a billion
/// elements) otherwise spend most of a GPU case filling host memory on one core.
template <typename F>
void for_each_chunk(int64_t n, F fill) {
  const int64_t chunks = (n + kRandomChunk - 1) / kRandomChunk;
  auto piece = [&](int64_t c) { fill(c * kRandomChunk, std::min(n, (c + 1) * kRandomChunk), c); };
  const int64_t threads =
      std::min<int64_t>(chunks, std::max(1u, std::thread::hardware_concurrency()));
  if (threads <= 1) {
    for (int64_t c = 0; c < chunks; ++c)
      piece(c);
    return;
  }
  std::atomic<int64_t> next{0};
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (int64_t c; (c = next.fetch_add(1)) < chunks;)
        piece(c);
    });
  for (auto& t : pool)
    t.join();
}

} // namespace

void HostTensor::fill_random(uint64_t seed, double lo, double hi) {
  if (is_int(dtype_)) {
    // The integers in [lo, hi) that the dtype holds; uniform_int_distribution's bounds are
    // both inclusive.
    double first = std::max(std::ceil(lo), static_cast<double>(int_min(dtype_)));
    double last = std::min(std::ceil(hi) - 1, static_cast<double>(int_max(dtype_)));
    if (!(first <= last))
      user_error() << "fill_random: [" << lo << ", " << hi << ") holds no " << dtype_name(dtype_)
                   << " value (" << dtype_name(dtype_) << " holds " << int_min(dtype_) << " to "
                   << int_max(dtype_) << "); give a range with an integer in it";
    for_each_chunk(numel_, [&](int64_t from, int64_t to, int64_t c) {
      std::mt19937_64 rng(chunk_seed(seed, c));
      std::uniform_int_distribution<int64_t> d(static_cast<int64_t>(first),
                                               static_cast<int64_t>(last));
      for (int64_t i = from; i < to; ++i)
        set(i, static_cast<double>(d(rng)));
    });
    return;
  }
  for_each_chunk(numel_, [&](int64_t from, int64_t to, int64_t c) {
    std::mt19937_64 rng(chunk_seed(seed, c));
    std::uniform_real_distribution<double> d(lo, hi);
    for (int64_t i = from; i < to; ++i)
      set(i, d(rng));
  });
}

void HostTensor::poison() {
  // Integers: the most negative value (u8: 255, the value farthest from 0).
  double v = !is_int(dtype_)       ? std::numeric_limits<double>::quiet_NaN()
             : dtype_ == DType::u8 ? 255.0
                                   : static_cast<double>(int_min(dtype_));
  fill(v);
}

void HostTensor::fill(double v) {
  for_each_chunk(numel_, [&](int64_t from, int64_t to, int64_t) {
    for (int64_t i = from; i < to; ++i)
      set(i, v);
  });
}

std::string HostTensor::shape_str() const {
  std::string s = "[";
  for (size_t i = 0; i < shape_.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape_[i]);
  return s + "]";
}

} // namespace tp
