// One shape's tuning as `tilepilot tune --spec` reports it: the search, then, when the winner is
// not the baseline (the config that would run untuned), the two timed side by side. The search's
// own timings come from different moments of a long run, so only the side-by-side numbers are
// used to say "tuned beats default".
#pragma once
#include <optional>

#include "autotune/Compare.h"
#include "autotune/Tuner.h"

namespace tp::autotune {

struct ShapeTuning {
  enum class Outcome {
    no_candidate,   // the search found no correct, measured config
    baseline_best,  // the baseline won the search: nothing to compare
    compared,       // another config won and was timed side by side with the baseline
    compare_failed, // another config won, but the side-by-side timing threw (see error)
  };
  Outcome outcome = Outcome::no_candidate;
  TuneResult search;
  ops::Config baseline;
  std::optional<SideBySide> comparison; // when compared
  std::string error;                    // when compare_failed

  /// Baseline time / tuned time: 1 when the baseline won; NaN without a result.
  double speedup() const;
  /// Medians (ms) of the side-by-side timing, or of the search when the baseline won; NaN
  /// without a result.
  double baseline_ms() const;
  double tuned_ms() const;
};
const char* outcome_name(ShapeTuning::Outcome o); // "no_candidate", "default_best", ...

/// Searches `space` with `hooks`, then compares the winner with `baseline` (`rounds` x `iters`
/// timed runs each, see compare_configs) unless the baseline won.
ShapeTuning tune_against_baseline(const ConfigSpace& space, const TuneHooks& hooks,
                                  const ops::Config& baseline, const TuneOptions& options,
                                  int rounds = 4, int iters = 20);

} // namespace tp::autotune
