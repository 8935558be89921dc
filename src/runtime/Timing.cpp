// Event timing with the L2 flushed between runs, and the median/IQR summary.
#include "runtime/Timing.h"

#include <algorithm>
#include <cmath>

#include "runtime/Driver.h"
#include "tilepilot/error.h"

namespace tp::rt {

namespace {

double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  double pos = q * static_cast<double>(sorted.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

/// Checked before the stream and flush buffer exist: bad counts are wrong on every machine.
TimingOptions checked(TimingOptions o) {
  if (o.runs < 1) user_error() << "timing: runs=" << o.runs << " must be at least 1";
  if (o.warmup < 0) user_error() << "timing: warmup=" << o.warmup << " must not be negative";
  return o;
}

} // namespace

Timing summarize(std::vector<double> samples) {
  Timing t;
  std::sort(samples.begin(), samples.end());
  if (!samples.empty()) {
    t.median_ms = quantile(samples, 0.5);
    t.iqr_ms = quantile(samples, 0.75) - quantile(samples, 0.25);
    t.min_ms = samples.front();
    t.max_ms = samples.back();
  }
  t.samples_ms = std::move(samples);
  return t;
}

double tflops(double flops, double ms) {
  return ms > 0 ? flops / (ms * 1e9) : 0;
}

double gb_per_s(double bytes, double ms) {
  return ms > 0 ? bytes / (ms * 1e6) : 0;
}

TimingHarness::TimingHarness(TimingOptions options) : options_(checked(options)) {
  if (options_.flush_l2) flush_ = DeviceBuffer(options_.flush_bytes / 4 * 4);
}

Timing TimingHarness::time(const Timed& fn) {
  return time(fn, options_.runs, options_.warmup);
}

Timing TimingHarness::time(const Timed& fn, int runs, int warmup) {
  if (runs < 1) user_error() << "timing: runs=" << runs << " must be at least 1";
  Driver& d = driver();
  CUstream s = stream_.get();
  for (int i = 0; i < warmup; ++i)
    fn(s);
  TILEPILOT_CU(d.cuStreamSynchronize(s));
  std::vector<double> samples;
  EventTimer timer;
  for (int i = 0; i < runs; ++i) {
    // A new value each time, so that no cache or compression can keep the old lines.
    if (options_.flush_l2)
      TILEPILOT_CU(d.cuMemsetD32Async(flush_.ptr(), ++flush_value_, flush_.bytes() / 4, s));
    timer.start(s);
    fn(s);
    timer.stop(s);
    samples.push_back(timer.elapsed_ms()); // waits for the stop event
  }
  return summarize(std::move(samples));
}

} // namespace tp::rt
