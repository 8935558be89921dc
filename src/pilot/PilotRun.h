// The state one pilot run shares between its stages (internal to src/pilot). Each stage reads
// what earlier stages measured from here and records its own outcome as a StageRecord.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "pilot/Pilot.h"
#include "pilot/Progress.h"

namespace tp::pilot {

/// One correctness case: a shape of the distribution in one dtype.
struct Case {
  int index = 0;
  const ShapeEntry* shape = nullptr;
  ops::Problem problem;
  uint64_t seed = 0;
  std::string label; // "rep0 bf16 M=4096,N=4096,K=4096,layout=nn"
  std::string mask;  // the operator's variant label (Operator::variant_label), e.g. "causal"
  bool representative() const { return shape->representative; }
  double weight() const { return shape->weight; }
};

struct PilotRun {
  const PilotSpec& spec;
  const PilotOptions& opt;
  std::shared_ptr<const ops::Operator> op; // with the spec's test-only fault, if any
  std::vector<Case> cases;
  Progress progress;
  // Files go to write_dir (the staging folder); reports and commands name final_dir, where
  // they are once the run finishes.
  std::string write_dir, final_dir;

  // Device probe.
  std::optional<rt::DeviceInfo> device;
  bool on_device = false; // device 0 is spec.device
  std::string no_device;  // "no sm_90a device (<reason>)" when !on_device

  // Measurements, filled by the stages that take them (indexed by Case::index).
  std::string check_backend = "cpu";
  std::vector<ops::CheckResult> checks;
  std::map<int, WarmTiming> warm;
  std::map<int, ops::Config> tuned;     // autotune results that passed re-verification
  std::map<int, WarmTiming> tuned_warm; // warm timing of the tuned config
  std::map<int, MemoryUsage> memory;
  std::optional<ModelResult> model;
  std::map<int, FallbackResult> fallback;
  std::map<std::string, CompileOnlyResult> compiled; // by kernel IR hash (release bytes)

  std::vector<StageRecord> stages;

  PilotRun(const PilotSpec& s, const PilotOptions& o);
  /// The config a case runs with: tuned (never when the spec pins knobs), else the target's
  /// default with the spec's pinned knobs.
  ops::Config config_for(const Case& c) const;
  const StageRecord* stage(const std::string& name) const;
  /// Runs `body` as stage `name`: times it, turns StageSkipped into `not run: <reason>` and
  /// any other exception into `failed` with data.error. `body` returns the status.
  void run_stage(const std::string& name, const std::function<std::string(nlohmann::json&)>& body);
  /// The status of a GPU stage that cannot run: why (no device, or the hook is missing).
  std::string gpu_unavailable(const std::string& hook_name, bool hook_present) const;
  /// "" when a measuring stage may run, else its `not run: ...` status: the metric is not in
  /// the spec, correctness did not pass, no target device, or no hook.
  std::string blocked(const std::string& metric, const std::string& hook_name,
                      bool hook_present) const;
};

/// The timing each case is judged by: the warm timing, or the tuned config's once adopted.
std::map<int, WarmTiming> best_timings(const PilotRun& r);

/// Whether the kernel serves a timed case. With objective.route all it serves every one; with
/// per_shape only those where its measured median is below the framework's (ties go to the
/// framework: a kernel must be measurably faster to be pinned).
bool routes_to_kernel(const PilotRun& r, const WarmTiming& t);

/// Warm timings weighted by the representative shape distribution: per dtype and overall
/// {weighted_ms, weighted_ref_ms, weighted_speedup}; null when a representative case has no
/// timing (nothing is extrapolated). With route per_shape a case counts at the time of what
/// serves it (routes_to_kernel), and kernel_weighted_speedup gives the kernel-everywhere ratio.
nlohmann::json weighted_summary(const PilotRun& r, const std::map<int, WarmTiming>& t);

/// One case's warm timing as report JSON (with speedup and TFLOP/s derived from it).
nlohmann::json warm_json(const PilotRun& r, const Case& c, const WarmTiming& t);

/// Current time, ISO 8601 UTC with milliseconds.
std::string now_iso8601();

/// The xxh64 of a kernel's canonical IR text: what names its compile and its release bytes.
std::string kernel_ir_hash(const Kernel& k);
/// The same over a program's steps: one step hashes as its kernel, several as their IR texts
/// one after another with their bindings and the intermediates' dtypes and ranks (sizes are
/// bound at launch), so that cases of one program share one compile.
std::string program_ir_hash(const ops::KernelProgram& prog);

// The stages, in order (each in its own file).
void stage_environment(PilotRun& r);
void stage_correctness(PilotRun& r); // StageCorrectness.cpp
void stage_compile(PilotRun& r);     // StageCompile.cpp
void stage_warm(PilotRun& r);        // StageTiming.cpp
void stage_memory(PilotRun& r);      // StageTiming.cpp
void stage_model(PilotRun& r);       // StageTiming.cpp
void stage_autotune(PilotRun& r);    // StageTuning.cpp
void stage_fallback(PilotRun& r);    // StageTuning.cpp
/// Decision.cpp: returns the decision and fills the "decision" stage.
std::string stage_decision(PilotRun& r);
void stage_release(PilotRun& r, const std::string& decision); // Release.cpp

} // namespace tp::pilot
