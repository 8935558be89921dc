// measure_peak_memory: one path at a time, between a reset of the high-water mark and a
// cuMemGetInfo sample taken before the path's objects are destroyed.
#include "perf/PeakMemory.h"

#include <algorithm>
#include <functional>

#include "ops/CudaCheck.h"
#include "perf/OursKernel.h"
#include "runtime/AllocationStats.h"
#include "runtime/Driver.h"
#include "runtime/Launch.h"

namespace tp::perf {

namespace {

size_t used_bytes() {
  size_t free = 0, total = 0;
  TILEPILOT_CU(rt::driver().cuMemGetInfo(&free, &total));
  return total - free;
}

/// `path` allocates, runs, and calls `sample` (after synchronizing, before freeing).
PathMemory measure_path(const std::function<void(const std::function<void()>& sample)>& path) {
  rt::ensure_context();
  TILEPILOT_CU(rt::driver().cuCtxSynchronize());
  rt::reset_device_allocation_peak();
  const uint64_t live0 = rt::device_allocation_stats().live_bytes;
  const size_t used0 = used_bytes();
  PathMemory m;
  path([&] {
    TILEPILOT_CU(rt::driver().cuCtxSynchronize());
    rt::AllocationStats s = rt::device_allocation_stats();
    m.counted_peak_bytes = s.peak_bytes - live0;
    int64_t grew = int64_t(used_bytes()) - int64_t(used0);
    int64_t counted_now = int64_t(s.live_bytes) - int64_t(live0);
    m.other_bytes = uint64_t(std::max<int64_t>(0, grew - counted_now));
  });
  return m;
}

} // namespace

PeakMemory measure_peak_memory(const ops::Operator& op, const ops::Problem& p, const ops::Config& c,
                               uint64_t seed) {
  std::vector<HostTensor> host = op.make_args(p, seed); // host memory: not counted
  PeakMemory r;
  r.kernel = measure_path([&](const auto& sample) {
    ops::DeviceArgs dev = ops::DeviceArgs::upload(host);
    OursKernel ours(op, p, c, dev.tensors);
    rt::Stream s;
    ours.launch(s.get());
    sample();
  });
  r.reference = measure_path([&](const auto& sample) {
    ops::DeviceArgs dev = ops::DeviceArgs::upload(host);
    std::unique_ptr<ops::Framework> ref = op.framework(p, {});
    r.reference_name = ref->name();
    rt::Stream s;
    ref->run(dev.tensors, s.get());
    sample();
  });
  return r;
}

} // namespace tp::perf
