// A batch of random programs made ready for the GPU: built, verified and lowered on the calling
// thread, then compiled through NVRTC into the kernel cache and run on the interpreter on worker
// threads, so that only the launches are left. GpuRandomPrograms uses it on the H200; a CPU test
// runs the same path (everything but the launch) in CI.
#pragma once
#include <string>
#include <vector>

#include "RandomProgram.h"
#include "codegen/cuda/LoweredKernel.h"

namespace tp::testing {

struct Job {
  uint64_t seed = 0;
  RandomProgram p;
  std::vector<HostTensor> init, want; // arguments before the run; after it on the interpreter
  cuda::LoweredKernel lk;             // the variant CudaKernel will pick for these arguments
  std::string rejected;               // a UserError of lowering: a backend restriction, skipped
  std::string failure;                // anything else, before the launch
};

/// The generator's options for the GPU comparison (every construct).
GenOptions gpu_options();

/// The variant CudaKernel::launch picks for p's arguments on `arch`: TMA unless a TMA-loaded
/// tensor's rows are not 16-byte multiples (device buffers are 256-byte aligned).
cuda::LoweredKernel lower_for_launch(const RandomProgram& p, const std::string& arch);

/// The lowering paths worth knowing the random programs reach that `lk` takes: the global ->
/// shared chunk copies (aligned, unaligned, two-phase), two-phase fragment loads, block stores,
/// paired reductions, cp.async and TMA pipelines, swizzled shared tiles. A path no program
/// reaches is one the GPU comparison never checks.
std::vector<std::string> lowering_paths(const cuda::LoweredKernel& lk);

/// Programs [start, start + n) for `arch`, prepared on `workers` threads.
std::vector<Job> prepare_batch(uint64_t start, size_t n, const GenOptions& o,
                               const std::string& arch, unsigned workers);

} // namespace tp::testing
