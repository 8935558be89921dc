// tp::time: the benchmarks' timing harness (src/runtime/Timing) behind the public API.
#include "runtime/Timing.h"
#include "tilepilot/timing.h"

namespace tp {

TimeResult time(const std::function<void(Stream)>& enqueue, const TimeOptions& o) {
  rt::TimingOptions ro;
  ro.runs = o.runs;
  ro.warmup = o.warmup;
  ro.flush_l2 = o.flush_l2;
  rt::TimingHarness h(ro);
  rt::Timing t = h.time([&](CUstream s) { enqueue(reinterpret_cast<Stream>(s)); });
  return {t.median_ms, t.iqr_ms, t.min_ms, t.max_ms, t.samples_ms};
}

TimeResult time(const CompiledKernel& ck, const std::vector<Arg>& args, const TimeOptions& o) {
  ck.prepare(args); // compile outside the timed runs
  return time([&](Stream s) { ck.launch(args, s); }, o);
}

} // namespace tp
