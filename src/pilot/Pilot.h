// The operator pilot (DESIGN.md, "The pilot spec"): runs the stages environment -> correctness
// -> compile -> warm -> memory -> model -> autotune -> fallback -> decision -> release on one
// spec and writes report.json, report.md and report.html (plus repro/, release/ or
// keep-framework.{md,json}) into the output folder. A stage that cannot run here says
// `not run: <reason>`; no stage reports a number it did not measure.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "pilot/Backends.h"
#include "pilot/Spec.h"

namespace tp::pilot {

/// One stage's outcome. status: "passed", "failed" or "not run: <reason>".
struct StageRecord {
  std::string name, status;
  std::string started, finished; // ISO 8601, UTC
  double seconds = 0;
  nlohmann::json data = nlohmann::json::object();

  bool passed() const { return status == "passed"; }
  bool failed() const { return status == "failed"; }
  bool ran() const { return passed() || failed(); }
};

enum class ProgressMode { automatic, on, off }; // automatic: on when stderr is a terminal

struct PilotOptions {
  std::string out_dir; // created if missing; replaced atomically when the run finishes
  /// Replace out_dir even when it holds folders or special files that are not a pilot's output
  /// (else user error; the user's regular files there are always kept).
  bool force = false;
  Backends backends = default_backends();
  double cpu_flop_budget = 3e8;            // interpreter work per case before blocks are sampled
  int shrink_attempts = 40;                // checks the shrinker may run on a failure
  std::string tilepilot_exe = "tilepilot"; // written into repro/command.txt
  ProgressMode progress = ProgressMode::automatic;
};

// The three decisions, spelled as they appear in reports.
inline constexpr const char* kRelease = "release";
inline constexpr const char* kKeepFramework = "keep framework operator";
inline constexpr const char* kUndecided = "undecided";

struct PilotResult {
  std::vector<StageRecord> stages;
  std::string decision;  // kRelease, kKeepFramework or kUndecided
  nlohmann::json report; // what report.json holds
  /// 0 when every stage that ran passed, 1 when one failed (e.g. correctness).
  int exit_code = 0;
  const StageRecord* stage(const std::string& name) const;
};

/// Runs the pilot and writes its files into o.out_dir: into a staging sibling first, swapped in
/// atomically at the end (OutputDir.h), so an earlier result survives a run killed mid-way.
PilotResult run_pilot(const PilotSpec& spec, const PilotOptions& o);

/// Default output folder for a spec file: "pilot-out/<spec file stem>".
std::string default_out_dir(const std::string& spec_file);

} // namespace tp::pilot
