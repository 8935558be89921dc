// Two configs of one problem timed side by side: a search's own timings come from different
// moments of a long run (clocks, temperature and neighbours drift), so a claim that the tuned
// config beats the default is re-measured here, alternating the two in one loop so that any drift
// lands on both equally.
#pragma once
#include "autotune/Hooks.h"

namespace tp::autotune {

struct SideBySide {
  Measurement baseline, candidate; // every sample of every round
  /// baseline median / candidate median: > 1 when the candidate is faster.
  double speedup() const;
};

/// Compiles both configs with `hooks.compile`, then runs `rounds` rounds of `iters` timed runs
/// each, baseline first in even rounds and candidate first in odd ones. Needs compile and
/// measure hooks; compile or measure errors propagate (the caller decides what a failed
/// comparison means).
SideBySide compare_configs(const TuneHooks& hooks, const ops::Config& baseline,
                           const ops::Config& candidate, int rounds = 4, int iters = 20);

} // namespace tp::autotune
