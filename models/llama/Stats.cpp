// Paired timing statistics.
#include "llama/Stats.h"

#include <cmath>
#include <limits>

#include "tilepilot/error.h"

namespace tp::models {

double t_quantile_975(int df) {
  static const double table[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
                                 2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
                                 2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
                                 2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
  if (df < 1) return std::numeric_limits<double>::quiet_NaN();
  if (df <= 30) return table[df - 1];
  if (df <= 40) return 2.021;
  if (df <= 60) return 2.000;
  if (df <= 120) return 1.980;
  return 1.960;
}

PairedStats paired_stats(const std::vector<double>& a, const std::vector<double>& b) {
  internal_assert(a.size() == b.size()) << "paired_stats: " << a.size() << " vs " << b.size();
  PairedStats s;
  s.runs = static_cast<int>(a.size());
  if (s.runs == 0) return s;
  double da = 0, db = 0, dd = 0;
  for (int i = 0; i < s.runs; ++i) {
    da += a[i];
    db += b[i];
    dd += a[i] - b[i];
  }
  s.a_mean = da / s.runs;
  s.b_mean = db / s.runs;
  const double mean_d = dd / s.runs;
  s.change_pct = 100.0 * mean_d / s.b_mean;
  if (s.runs < 2) {
    s.ci_low_pct = s.ci_high_pct = std::numeric_limits<double>::quiet_NaN();
    return s;
  }
  double var = 0;
  for (int i = 0; i < s.runs; ++i)
    var += std::pow(a[i] - b[i] - mean_d, 2);
  var /= s.runs - 1;
  const double half = t_quantile_975(s.runs - 1) * std::sqrt(var / s.runs);
  s.ci_low_pct = 100.0 * (mean_d - half) / s.b_mean;
  s.ci_high_pct = 100.0 * (mean_d + half) / s.b_mean;
  return s;
}

} // namespace tp::models
