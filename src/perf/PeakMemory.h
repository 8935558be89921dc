// Peak device memory of running one problem ours vs the framework way, each path measured on its
// own with everything it allocates: the operator's arguments, the kernel's (or the vendor
// library's) workspace, and the reference's own buffers.
//
// How: every buffer either path allocates is an rt::DeviceBuffer, whose allocations are counted
// exactly with a high-water mark (runtime/AllocationStats.h). What a library allocates behind our
// back (cuDNN's plan memory, a module's code, the driver's local-memory pool for a kernel) is not
// a DeviceBuffer; that part is taken from cuMemGetInfo, as the growth of device memory in use
// that the counter does not explain, sampled while the path is still alive after it ran. That
// part is a lower bound (a library's temporary allocation freed before the sample is missed) and
// assumes nothing else allocates on the GPU meanwhile, which is how the pilot runs.
#pragma once
#include <cstdint>
#include <string>

#include "ops/Operator.h"

namespace tp::perf {

struct PathMemory {
  uint64_t counted_peak_bytes = 0; // DeviceBuffer high-water mark over the path
  uint64_t other_bytes = 0;        // device memory in use the counter does not explain
  double peak_mb() const { return double(counted_peak_bytes + other_bytes) / (1 << 20); }
};

struct PeakMemory {
  PathMemory kernel, reference;
  std::string reference_name;
};

/// Runs ours (config `c`) and then the reference for `p` on the current GPU, one after the
/// other, each from nothing. User error when there is no GPU or no reference for `p`.
PeakMemory measure_peak_memory(const ops::Operator& op, const ops::Problem& p, const ops::Config& c,
                               uint64_t seed = 3);

} // namespace tp::perf
