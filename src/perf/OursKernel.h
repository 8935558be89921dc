// "Ours" for measurement: the operator's tile-language kernel program (one kernel, or several
// in order with their intermediates) for one problem and config, compiled by the CUDA backend for
// the current GPU and bound to device tensors, so that timing it enqueues launches and nothing
// else. Shared by `tilepilot bench`, the pilot's hooks and the tuner; the inputs are the operator's
// seeded arguments (the same ones a check uses).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "compile/CudaKernel.h"
#include "ops/CudaCheck.h"
#include "ops/CudaProgram.h"

namespace tp::perf {

/// The operator's arguments for (p, seed), on the device (inputs random, outputs poisoned).
ops::DeviceArgs upload_args(const ops::Operator& op, const ops::Problem& p, uint64_t seed);

class OursKernel {
public:
  /// Builds the program, compiles every step through the caches and loads it for the current GPU,
  /// for the shapes and alignment of `args` (which must outlive this object). User error when there
  /// is no GPU or the config is invalid.
  OursKernel(const ops::Operator& op, const ops::Problem& p, const ops::Config& c,
             const std::vector<cuda::DeviceTensor>& args);
  /// The same for a program built already (one that measure_compile loaded launches at once;
  /// a fresh build of the same config would generate different names and compile again).
  OursKernel(const ops::KernelProgram& prog, const std::vector<cuda::DeviceTensor>& args);
  /// Enqueues one call (every step's launch) on `stream`.
  void launch(CUstream stream) { kernel_->launch(args_, stream); }
  const std::string& arch() const { return arch_; }
  const cuda::CompileTimings& timings() const { return timings_; }

private:
  std::string arch_;
  std::vector<cuda::DeviceTensor> args_;
  std::unique_ptr<ops::CudaProgram> kernel_;
  cuda::CompileTimings timings_;
};

} // namespace tp::perf
