// Kernel timing on the GPU, shared by the benchmarks (bench/), `tilepilot bench`, the pilot's
// warm stage and the tuner: a function of a stream is run after warm-up, each timed run between
// two CUDA events with the L2 flushed just before the start event (outside the timed window), and
// the samples are summarized by their median and interquartile range. One process, one stream:
// ours and a vendor reference timed by the same harness are directly comparable.
#pragma once
#include <cuda.h>
#include <functional>
#include <vector>

#include "runtime/DeviceBuffer.h"
#include "runtime/Launch.h"

namespace tp::rt {

/// Something to time: enqueues its work on the given stream and nothing else (no allocation, no
/// synchronization, no compilation).
using Timed = std::function<void(CUstream)>;

struct TimingOptions {
  int warmup = 10;
  int runs = 50;
  bool flush_l2 = true;
  size_t flush_bytes = size_t(256) << 20; // well over the H200's 60 MB L2
};

struct Timing {
  double median_ms = 0, iqr_ms = 0, min_ms = 0, max_ms = 0;
  std::vector<double> samples_ms;
};

/// Median and IQR (Q3 - Q1, linear interpolation between order statistics) of `samples_ms`.
Timing summarize(std::vector<double> samples_ms);

/// flops / (ms * 1e9): TFLOP/s.
double tflops(double flops, double ms);
/// bytes / (ms * 1e6): GB/s.
double gb_per_s(double bytes, double ms);

class TimingHarness {
public:
  /// Makes the GPU's context current, creates a stream and (when flushing) the flush buffer.
  /// User error when runs < 1 or warmup < 0.
  explicit TimingHarness(TimingOptions options = {});
  CUstream stream() const { return stream_.get(); }
  const TimingOptions& options() const { return options_; }

  /// Runs `fn` options.warmup times, then options.runs times each between two events, with the
  /// L2 flushed (cuMemsetD32Async over the flush buffer) before each start event.
  Timing time(const Timed& fn);
  /// The same with explicit counts (the tuner asks for a different number per call).
  Timing time(const Timed& fn, int runs, int warmup);

private:
  TimingOptions options_;
  Stream stream_;
  DeviceBuffer flush_;
  uint32_t flush_value_ = 0;
};

} // namespace tp::rt
