// The benchmark harness: side-by-side records of ours vs a vendor reference (cuBLASLt, cuDNN)
// measured in the same process, their table and JSON, the registry through which the CUDA
// backend provides "ours", and a device-side input fill. Timing itself (CUDA events, the L2
// flushed before every timed run outside the timed window, median and interquartile range) is
// runtime/Timing.h, aliased below.
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
#include "runtime/Timing.h"

namespace tp::bench {

// The timing core lives in the core library (runtime/Timing.h) so that `tilepilot bench`, the
// pilot and the tuner time exactly as these programs do; the names stay available here.
using Timed = rt::Timed;
using TimingOptions = rt::TimingOptions;
using Timing = rt::Timing;
using Harness = rt::TimingHarness;
using rt::summarize;
using rt::tflops;

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
