#include "autotune/Compare.h"

#include "tilepilot/error.h"

namespace tp::autotune {

double SideBySide::speedup() const {
  return baseline.median_ms() / candidate.median_ms();
}

SideBySide compare_configs(const TuneHooks& hooks, const ops::Config& baseline,
                           const ops::Config& candidate, int rounds, int iters) {
  if (!hooks.compile || !hooks.measure)
    throw std::logic_error("compare_configs needs compile and measure hooks");
  if (rounds < 1 || iters < 1) throw std::logic_error("compare_configs: rounds and iters >= 1");
  const CompiledCandidate a = hooks.compile(baseline);
  const CompiledCandidate b = hooks.compile(candidate);
  SideBySide r;
  auto run = [&](const ops::Config& c, const CompiledCandidate& cc, Measurement& into) {
    Measurement m = hooks.measure(0, c, cc, iters); // one device: both sides on the same GPU
    into.ms.insert(into.ms.end(), m.ms.begin(), m.ms.end());
  };
  // Alternating which goes first keeps a warm-up or cache effect of going second off one side.
  for (int i = 0; i < rounds; ++i) {
    if (i % 2 == 0) {
      run(baseline, a, r.baseline);
      run(candidate, b, r.candidate);
    } else {
      run(candidate, b, r.candidate);
      run(baseline, a, r.baseline);
    }
  }
  return r;
}

} // namespace tp::autotune
