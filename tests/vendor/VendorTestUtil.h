// Helpers shared by the vendor and reference tests: element-wise comparison with a report that
// names the feature under test and the worst element, and host <-> device transfers of
// HostTensors with poisoned outputs.
#pragma once
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>
#include <string>
#include <vector>

#include "runtime/DeviceBuffer.h"
#include "tilepilot/tensor.h"

namespace tp::test {

struct Comparison {
  bool passed = true;
  std::string report; // empty when passed
};

/// |got - want| <= atol + rtol |want| everywhere; NaN never passes; infinities must match exactly
/// (LSE of a row with no valid key is -inf). `what` names the feature, e.g. "cuDNN causal GQA O".
inline Comparison compare(const std::string& what, const std::vector<double>& want,
                          const std::vector<float>& got, double atol, double rtol) {
  Comparison c;
  if (want.size() != got.size()) {
    c.passed = false;
    c.report =
        fmt::format("{}: size mismatch, got {} values, want {}", what, got.size(), want.size());
    return c;
  }
  size_t bad = 0, nans = 0, worst = 0;
  double worst_excess = -1, max_abs = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double g = got[i], w = want[i];
    bool ok;
    if (std::isnan(g)) {
      ok = false;
      ++nans;
    } else if (std::isinf(w) || std::isinf(g)) {
      ok = g == w;
    } else {
      double err = std::fabs(g - w);
      max_abs = std::max(max_abs, err);
      ok = err <= atol + rtol * std::fabs(w);
    }
    if (ok) continue;
    ++bad;
    double excess = std::isnan(g) || std::isinf(g) || std::isinf(w)
                        ? INFINITY
                        : std::fabs(g - w) - (atol + rtol * std::fabs(w));
    if (excess > worst_excess) {
      worst_excess = excess;
      worst = i;
    }
  }
  if (bad == 0) return c;
  c.passed = false;
  c.report = fmt::format("{}: {} of {} values out of tolerance (atol {}, rtol {}), {} NaN; worst "
                         "at flat index {}: got {}, want {}; max |err| over finite values {:.3g}",
                         what, bad, want.size(), atol, rtol, nans, worst, got[worst], want[worst],
                         max_abs);
  return c;
}

inline rt::DeviceBuffer upload(const HostTensor& t) {
  rt::DeviceBuffer b(t.bytes());
  b.upload(t.data(), t.bytes());
  return b;
}

/// A device buffer for `bytes`, filled with 0xff bytes: NaN in f32, bf16 and f16.
inline rt::DeviceBuffer poisoned(size_t bytes) {
  rt::DeviceBuffer b(bytes);
  b.memset(0xff);
  return b;
}

} // namespace tp::test
