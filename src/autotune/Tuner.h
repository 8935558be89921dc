// The measured search over a pruned config space. Candidates compile in parallel on CPU threads
// while earlier ones are timed, one at a time per device, on every device the hooks measure on;
// results are folded in candidate order, so the search's decisions do not depend on how many
// devices measured (Tuner.cpp says exactly what does). A
// candidate that fails to compile or verify, spills, overruns its time limit, or computes wrong
// results is recorded and skipped, never fatal; only a candidate that passed check_correct can
// win. A GPU fault (tp::DeviceFault) is the exception: the context is lost, so the search stops
// there with nothing found (TuneResult::device_fault). Early stop: each candidate is first timed
// briefly and dropped when its median is far slower than the best so far.
#pragma once
#include <exception>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "autotune/ConfigSpace.h"
#include "autotune/Hooks.h"

namespace tp::autotune {

enum class CandidateStatus {
  pruned,         // before compiling, by estimate (ConfigSpace::pruned)
  verify_failed,  // compile hook threw tp::UserError: the builder or verifier rejected it
  compile_failed, // compile hook threw anything else
  spills,         // post-compile: ptxas reported spills
  timed_out,      // compile, or measurement, took longer than the per-config limit
  run_failed,     // measure or check_correct threw (launch failure, bad samples)
  compiled,       // compile-only run (no measure hook): compiled and passed post-compile checks
  early_stopped,  // brief median > early_stop_ratio x best median
  measured,       // fully measured, not faster than the best (so never checked)
  incorrect,      // faster than the best, but check_correct failed (or there is no check hook)
  best,           // the winner
  skipped,        // not reached: the total budget ran out
};
const char* status_name(CandidateStatus s);

struct TuneOptions {
  int brief_iters = 3; // runs of the early-stop probe
  int full_iters = 20; // runs of the full measurement
  double early_stop_ratio = 1.5;
  // Limit for the compile, and separately for the measurement (brief + full), of one config.
  // The check is not limited: its cost is the CPU reference, not the candidate.
  double per_config_seconds = 60;
  double budget_seconds = 0; // whole search; 0: none
  int compile_threads = 0;   // 0: std::thread::hardware_concurrency()
  enum class Progress { automatic, on, off } progress = Progress::automatic; // automatic: TTY
  std::string label; // shown in the progress bar ("<op> M=4096,...")
};

struct CandidateLog {
  ops::Config config;
  CandidateStatus status = CandidateStatus::skipped;
  std::string reason;
  int64_t smem_bytes = 0, acc_regs = 0;                // estimates
  int registers = -1;                                  // ptxas; -1 unknown
  double compile_s = -1, check_s = -1, measure_s = -1; // -1: stage not run
  double brief_median_ms = -1, median_ms = -1, iqr_ms = -1;
};

struct TuneResult {
  bool found = false; // a correct, measured best exists (never after a device fault)
  /// The tp::DeviceFault that stopped the search: that candidate is run_failed, the later ones
  /// skipped, and nothing is found, so nothing gets stored. Null when no candidate faulted.
  std::exception_ptr device_fault;
  ops::Config best; // valid when found
  Measurement best_measurement;
  std::vector<CandidateLog> log; // every candidate: kept ones in search order, then pruned ones
  double wall_s = 0;
  std::map<std::string, int64_t> neutral; // the space's neutral knob values (is_default_config)
  const CandidateLog* best_log() const;   // nullptr when !found
  std::map<std::string, int64_t> status_counts() const;
};

/// Runs the search over `space.kept` in order. `hooks.compile` is required; without `measure`
/// the search stops after compiling (statuses `compiled`), which is a compile check, not a
/// tuning result. Hooks must stay callable until tune() returns; a compile that overran its
/// limit is abandoned on its worker thread (it cannot be interrupted), so anything its hook
/// captures must outlive it too: capture shared state by shared_ptr.
TuneResult tune(const ConfigSpace& space, const TuneHooks& hooks, const TuneOptions& options = {});

/// Rethrows r.device_fault, if any: callers that store or compare results call this after
/// reporting the log, so that a fault ends the command with its own error (and exit status).
void rethrow_device_fault(const TuneResult& r);

/// The full-measurement median (ms) of the logged candidate that is `config` (knobs left at their
/// defaults compare equal, see is_default_config); -1 when it was not fully measured (pruned,
/// failed, early-stopped or skipped).
double full_median_ms(const TuneResult& r, const ops::Config& config);

nlohmann::json to_json(const CandidateLog& c);
nlohmann::json to_json(const TuneResult& r);

} // namespace tp::autotune
