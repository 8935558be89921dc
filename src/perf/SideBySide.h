// Ours and the framework reference timed side by side on one problem: same process, same
// stream, same inputs, L2 flushed before every timed run, median and IQR of each; ours is
// checked against the fp64 reference first when asked (a wrong kernel is never timed), and its
// cold and warm compile are measured on the way. `tilepilot bench` and the pilot's warm stage.
#pragma once
#include <optional>
#include <string>

#include "ops/Check.h"
#include "perf/CompileTiming.h"
#include "runtime/Timing.h"

namespace tp::perf {

struct SideBySideOptions {
  rt::TimingOptions timing;
  uint64_t seed = 3;       // inputs
  bool check_first = true; // check ours (fp64 reference, sampled) before timing it
  bool compile_timing = true;
  /// Also time a device-to-device copy in the same process, the memory-bound yardstick
  /// (SideBySide::copy_gbps).
  bool copy_bandwidth = false;
};

struct SideBySide {
  std::string arch, device; // "sm_90a", "NVIDIA H200"
  ops::Config config;
  double flops = 0;
  double bytes = 0; // Operator::min_bytes: every input read once, every output written once
  std::optional<ops::CheckResult> check; // when check_first
  std::optional<CompileReport> compile;  // when compile_timing
  std::optional<rt::Timing> ours;        // absent when the check failed
  std::string ref_name, ref_note;        // ref_note: why the reference is a stand-in, or absent
  std::optional<rt::Timing> ref;         // absent when no reference runs here (ref_note says why)
  /// GB/s of a device-to-device copy timed in the same run (SideBySideOptions::copy_bandwidth).
  std::optional<double> copy_gbps;
  /// ref median / ours median, when both were timed.
  std::optional<double> speedup() const;
};

/// Measures `p` with config `c` (validated) on the current GPU. User error when there is no
/// GPU or `c` is invalid; a failed check returns with `check` set and nothing timed.
SideBySide time_side_by_side(const ops::Operator& op, const ops::Problem& p, const ops::Config& c,
                             const SideBySideOptions& o = {});

} // namespace tp::perf
