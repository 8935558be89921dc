// What the pilot needs from a GPU backend, as hooks. The pilot itself only knows the CPU
// interpreter; the CUDA backend fills these in `default_backends()` (Backends.cpp). An empty hook
// makes its stage say `not run: <reason>`, and a hook that cannot run on this machine throws
// StageSkipped with the reason; any other exception fails the stage with its message. Numbers
// in the results are measured by the hook; the pilot never fills in one it was not given.
#pragma once
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/Check.h"
#include "tilepilot/runtime.h"

namespace tp::pilot {

struct ModelSpec;

/// Thrown by a hook that cannot run here (library missing, ...): the stage is `not run: what()`.
struct StageSkipped : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// NVRTC for the target arch, no device needed. `resources` as ptxas reports them (registers,
/// shared_bytes, spill_bytes, ...).
struct CompileOnlyResult {
  std::string cuda_source, nvrtc_log, cubin; // cubin: raw bytes
  double nvrtc_ms = 0;
  nlohmann::json resources = nlohmann::json::object();
};

/// Cold compile (cache bypassed) by phase, in order (build, passes, codegen, nvrtc, module
/// load), and warm compile (cache hit), in milliseconds.
struct CompileTiming {
  std::vector<std::pair<std::string, double>> cold_phases_ms;
  double cold_ms = 0, warm_ms = 0;
};

/// Warm execution: CUDA events, L2 flushed, ours and the reference in the same process.
struct WarmTiming {
  double ms_median = 0, ms_iqr = 0;
  std::string ref_name; // "cuBLASLt", "cuDNN"
  double ref_ms_median = 0, ref_ms_iqr = 0;
  int iterations = 0;
};

/// Peak device memory of the kernel path and of the reference path, workspaces included.
struct MemoryUsage {
  double kernel_peak_mb = 0, reference_peak_mb = 0;
};

/// The model path run with the kernel and with the fallback, interleaved.
struct ModelResult {
  std::string model;
  double baseline_ms = 0, kernel_ms = 0;
  double change_pct = 0, ci_low_pct = 0, ci_high_pct = 0; // kernel vs baseline, 95% CI
  double op_time_share = 0;                               // of baseline time, in [0, 1]
  double predicted_change_pct = 0; // from the time share and the operator speedup
  int runs = 0;
};

/// Autotuning of one problem, starting from `start`.
struct TuneResult {
  ops::Config best;
  double best_ms = 0;
  int trials = 0;
};

/// The fallback (cuBLASLt / cuDNN) run on a problem and checked against the reference.
struct FallbackResult {
  std::string name;
  bool passed = false;
  double max_abs_err = 0;
};

struct Backends {
  /// Device 0 as the pilot sees it; defaults to rt::device_info(0). Tests pass fakes here.
  std::function<std::optional<rt::DeviceInfo>(std::string* why_not)> device;
  /// Correctness on the GPU (the CUDA backend's ops::check).
  std::function<ops::CheckResult(const ops::Operator&, const ops::Problem&,
                                 const ops::CheckOptions&)>
      check_cuda;
  /// NVRTC only: runs without a GPU.
  std::function<CompileOnlyResult(const Kernel&, const std::string& arch)> compile_only;
  std::function<CompileTiming(const ops::Operator&, const ops::Problem&, const ops::Config&,
                              const std::string& arch)>
      compile_timing;
  std::function<WarmTiming(const ops::Operator&, const ops::Problem&, const ops::Config&)>
      warm_timing;
  std::function<MemoryUsage(const ops::Operator&, const ops::Problem&, const ops::Config&)> memory;
  /// `configs`: the pinned config per representative problem the kernel serves;
  /// `framework_routed`: those objective.route per_shape sends to the framework (a model
  /// problem nearest to one of these runs the fallback in both runs).
  std::function<ModelResult(const ModelSpec&, const ops::Operator&,
                            const std::vector<std::pair<ops::Problem, ops::Config>>& configs,
                            const std::vector<ops::Problem>& framework_routed)>
      model_run;
  std::function<TuneResult(const ops::Operator&, const ops::Problem&, const ops::Config& start)>
      tune;
  std::function<FallbackResult(const ops::Operator&, const ops::Problem&)> fallback_test;
};

/// The hooks this build provides (the device probe always; the rest as backends land).
Backends default_backends();

} // namespace tp::pilot
