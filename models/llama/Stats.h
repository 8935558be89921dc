// Paired timing statistics: two variants timed in interleaved runs, compared run by run.
#pragma once
#include <vector>

namespace tp::models {

struct PairedStats {
  int runs = 0;
  double a_mean = 0, b_mean = 0; // ms
  /// (a - b) / b in percent, and its 95% confidence interval from the paired differences
  /// (Student t over the runs, relative to b's mean); NaN with fewer than 2 runs.
  double change_pct = 0, ci_low_pct = 0, ci_high_pct = 0;
};

/// `a` and `b` are per-run times of the two variants, run i of each measured back to back.
PairedStats paired_stats(const std::vector<double>& a, const std::vector<double>& b);

/// The 0.975 quantile of Student's t with `df` degrees of freedom (1.96 beyond 120).
double t_quantile_975(int df);

} // namespace tp::models
