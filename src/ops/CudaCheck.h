// Running operators on the GPU through the CUDA backend: the check runner (whole grid on the
// device, outputs compared with the fp64 reference on sampled blocks) and device copies of
// host tensors.
#pragma once
#include "compile/CudaKernel.h"
#include "ops/Check.h"
#include "runtime/DeviceBuffer.h"

namespace tp::ops {

/// Host tensors copied to the device, and the matching kernel arguments.
struct DeviceArgs {
  std::vector<rt::DeviceBuffer> buffers;
  std::vector<cuda::DeviceTensor> tensors;
  static DeviceArgs upload(const std::vector<HostTensor>& host);
  void download(std::vector<HostTensor>& host, const std::vector<int>& which) const;
};

/// The arch of device 0 ("sm_90a"), or a user error saying why there is no usable GPU.
std::string device_arch();

CheckResult check_cuda(const Operator& op, const Problem& p, CheckOptions o);

} // namespace tp::ops
