// Shared pieces of the executors.
#include "llama/Exec.h"

#include "tilepilot/error.h"

namespace tp::models {

int64_t Buf::numel() const {
  int64_t n = 1;
  for (int64_t e : shape)
    n *= e;
  return n;
}

Buf Buf::reshaped(std::vector<int64_t> to) const {
  Buf b = *this;
  b.shape = std::move(to);
  internal_assert(b.numel() == numel())
      << "Buf::reshaped: " << b.numel() << " elements, not " << numel();
  return b;
}

ops::Dispatcher& Exec::dispatcher() const {
  internal_assert(dispatch_ != nullptr) << "the model's Exec has no dispatcher";
  return *dispatch_;
}

double uniform_value(uint64_t seed, uint64_t index, double center, double half_width) {
  // splitmix64: a counter-based generator, so any element can be computed independently (the
  // device fills in parallel) and the host and device agree.
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + index + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  double u = static_cast<double>(z >> 40) * (1.0 / 16777216.0); // [0, 1), 24 bits: exact
  return center + half_width * (2.0 * u - 1.0);
}

} // namespace tp::models
