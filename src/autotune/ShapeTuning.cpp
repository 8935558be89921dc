#include "autotune/ShapeTuning.h"

#include <cmath>

#include "tilepilot/device_error.h"

namespace tp::autotune {

const char* outcome_name(ShapeTuning::Outcome o) {
  switch (o) {
  case ShapeTuning::Outcome::no_candidate:
    return "no_candidate";
  case ShapeTuning::Outcome::baseline_best:
    return "default_best";
  case ShapeTuning::Outcome::compared:
    return "compared";
  case ShapeTuning::Outcome::compare_failed:
    return "compare_failed";
  }
  return "?";
}

double ShapeTuning::speedup() const {
  if (outcome == Outcome::baseline_best) return 1.0;
  if (comparison) return comparison->speedup();
  return std::nan("");
}

double ShapeTuning::baseline_ms() const {
  if (outcome == Outcome::baseline_best) return search.best_measurement.median_ms();
  if (comparison) return comparison->baseline.median_ms();
  return std::nan("");
}

double ShapeTuning::tuned_ms() const {
  if (outcome == Outcome::baseline_best) return search.best_measurement.median_ms();
  if (comparison) return comparison->candidate.median_ms();
  return std::nan("");
}

ShapeTuning tune_against_baseline(const ConfigSpace& space, const TuneHooks& hooks,
                                  const ops::Config& baseline, const TuneOptions& options,
                                  int rounds, int iters) {
  ShapeTuning t;
  t.baseline = baseline;
  t.search = tune(space, hooks, options);
  if (t.search.device_fault) return t; // the caller reports the log, then rethrows
  if (!t.search.found) return t;
  if (is_default_config(t.search.best, baseline, space.neutral)) {
    t.outcome = ShapeTuning::Outcome::baseline_best;
    return t;
  }
  try {
    t.comparison = compare_configs(hooks, baseline, t.search.best, rounds, iters);
    t.outcome = ShapeTuning::Outcome::compared;
  } catch (const DeviceFault& e) {
    // Stored like the search's own fault, so the caller has one place to look.
    t.outcome = ShapeTuning::Outcome::compare_failed;
    t.error = reason_text(e);
    t.search.device_fault = std::current_exception();
    t.search.found = false;
  } catch (const std::exception& e) {
    t.outcome = ShapeTuning::Outcome::compare_failed;
    t.error = reason_text(e);
  }
  return t;
}

} // namespace tp::autotune
