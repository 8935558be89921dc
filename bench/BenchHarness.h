// The benchmark harness: times a function of a stream with CUDA events, the L2 flushed before
// every timed run (outside the timed window), after warm-up; reports the median and the
// interquartile range, and side-by-side records of ours vs a vendor reference (cuBLASLt, cuDNN)
// measured in the same process. Also the registry through which the CUDA backend provides "ours".
#pragma once
#include <cuda.h>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ops/Operator.h"
#include "runtime/DeviceBuffer.h"
#include "runtime/Launch.h"

namespace tp::bench {

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

class Harness {
public:
  /// Makes the GPU's context current, creates a stream and (when flushing) the flush buffer.
  explicit Harness(TimingOptions options = {});
  CUstream stream() const { return stream_.get(); }
  const TimingOptions& options() const { return options_; }

  /// Runs `fn` options.warmup times, then options.runs times each between two events, with the
  /// L2 flushed (cuMemsetD32Async over the flush buffer) before each start event.
  Timing time(const Timed& fn);

private:
  TimingOptions options_;
  rt::Stream stream_;
  rt::DeviceBuffer flush_;
  uint32_t flush_value_ = 0;
};

/// One problem timed both ways. A side that could not run has no timing and a note saying why.
struct SideBySide {
  std::string op, shape, dtype;
  double flops = 0;
  std::optional<Timing> ours;
  std::string ours_note; // "not available (<reason>)" when ours is absent
  std::string ref_name;  // "cuBLASLt 13.1.0", "cuDNN 9.14.0"
  std::optional<Timing> ref;
  std::string ref_note;
  std::optional<double> speedup() const; // ref median / ours median, when both ran
};

/// {op, shape, dtype, flops, ours_ms_median, ours_ms_iqr, ours_tflops, ours_note, ref_name,
///  ref_ms_median, ref_ms_iqr, ref_tflops, ref_note, speedup}; absent numbers are null.
nlohmann::json to_json(const SideBySide& r);

/// A fixed-width table, one row per record, and the geometric mean of the speedups that exist.
std::string format_table(const std::vector<SideBySide>& records);

/// Geometric mean of the speedups present; nullopt when none.
std::optional<double> geomean_speedup(const std::vector<SideBySide>& records);

/// How the CUDA backend provides "ours": given a problem, a function to time, or nullopt with the
/// reason in `why_not`. The function owns its inputs and outputs (capture them by value, e.g. in
/// a shared_ptr) and only enqueues work on the stream it is given; compilation belongs in the
/// factory, not in the timed function.
using OursFactory = std::function<std::optional<Timed>(const ops::Problem&, std::string* why_not)>;

/// Registers the factory for operator `op` ("gemm", "attention"); a later call replaces it.
/// Returns true so it can initialise a static in the file that registers.
bool register_ours(const std::string& op, OursFactory factory);

/// The factory for `op`, or nullptr when none is registered.
const OursFactory* find_ours(const std::string& op);

/// Times "ours" for `p` into `r.ours` through the factory registered for p.op, or sets
/// `r.ours_note` to "not available (<reason>)" and prints "ours: not available (<reason>)".
void time_ours(Harness& h, const ops::Problem& p, SideBySide& r);

/// What bench programs write with --json: {bench, environment, options, records,
/// geomean_speedup}.
nlohmann::json report_json(const std::string& bench, const TimingOptions& o,
                           const std::vector<SideBySide>& records);

/// Writes `j` (indented) to `path`; UserError naming the path when it cannot.
void write_json(const std::string& path, const nlohmann::json& j);

/// Fills `count` elements of bf16/f16 at `dst` with values uniform in [-1, 1), from `seed`, on
/// the GPU (hash-based, so large inputs cost no host time).
void fill_uniform(CUdeviceptr dst, size_t count, DType dtype, uint64_t seed, CUstream stream);

} // namespace tp::bench
