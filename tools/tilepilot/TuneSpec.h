// `tilepilot tune --spec FILE`: tunes every shape of a pilot spec (representative and edge, each
// dtype) with a budget per shape, then times each winner side by side with the config the pilot
// would otherwise run (the target's default, with the spec's pinned knobs), alternating the two
// in one loop. Prints a table and the weighted effect on the representative shapes; optionally
// writes the winners that beat the default by a margin as a pinned table for a release.
#pragma once
#include <string>

namespace tp::cli {

struct TuneSpecArgs {
  std::string spec, space, pinned_out;
  double budget_per_shape = 30, config_timeout = 60;
  double min_gain = 0.02; // a winner is pinned when it is at least this much faster
  bool json = false, dry_run = false, no_store = false;
};

/// Exit status in *rc: 0 every shape tuned (or --dry-run); 1 a shape found no correct candidate
/// or its comparison failed; 2 bad input, or no GPU of the spec's device (`not run`).
void run_tune_spec(const TuneSpecArgs& a, int* rc);

} // namespace tp::cli
