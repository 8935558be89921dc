// Timing a launched kernel the way the benchmarks do: warm-up, then each run between two CUDA
// events with the L2 flushed just before (outside the timed window); median and IQR.
#pragma once
#include <functional>
#include <vector>

#include "tilepilot/compile.h"

namespace tp {

struct TimeOptions {
  int runs = 20;
  int warmup = 5;
  bool flush_l2 = true;
};

struct TimeResult {
  double median_ms = 0, iqr_ms = 0, min_ms = 0, max_ms = 0;
  std::vector<double> samples_ms;
};

/// Times `ck.launch(args)` on a private stream.
TimeResult time(const CompiledKernel& ck, const std::vector<Arg>& args, const TimeOptions& o = {});
/// Times any work that `enqueue` puts on the stream it is given (a baseline, several launches).
TimeResult time(const std::function<void(Stream)>& enqueue, const TimeOptions& o = {});

} // namespace tp
