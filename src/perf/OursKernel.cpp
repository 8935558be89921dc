// OursKernel: build, compile and load once; launch many times.
#include "perf/OursKernel.h"

namespace tp::perf {

namespace {
ops::KernelProgram checked_build(const ops::Operator& op, const ops::Problem& p,
                                 const ops::Config& c) {
  ops::check_config(op, p, c, ops::device_arch());
  return ops::checked_program(op, p, c);
}
} // namespace

ops::DeviceArgs upload_args(const ops::Operator& op, const ops::Problem& p, uint64_t seed) {
  return ops::DeviceArgs::upload(op.make_args(p, seed));
}

OursKernel::OursKernel(const ops::Operator& op, const ops::Problem& p, const ops::Config& c,
                       const std::vector<cuda::DeviceTensor>& args)
    : OursKernel(checked_build(op, p, c), args) {}

OursKernel::OursKernel(const ops::KernelProgram& prog, const std::vector<cuda::DeviceTensor>& args)
    : arch_(ops::device_arch()), args_(args),
      kernel_(std::make_unique<ops::CudaProgram>(prog, arch_)) {
  // Compile and load now, so that the first timed launch does not pay for it.
  timings_ = kernel_->prepare(args_);
}

} // namespace tp::perf
