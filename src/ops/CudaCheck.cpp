// GPU check runner.
#include "ops/CudaCheck.h"

#include "ops/CudaProgram.h"
#include "runtime/DeviceFaults.h"
#include "runtime/Driver.h"
#include "tilepilot/runtime.h"

namespace tp::ops {

DeviceArgs DeviceArgs::upload(const std::vector<HostTensor>& host) {
  DeviceArgs d;
  for (const HostTensor& h : host) {
    d.buffers.emplace_back(std::max<size_t>(h.bytes(), 16));
    d.buffers.back().upload(h.data(), h.bytes());
    d.tensors.push_back({d.buffers.back().ptr(), h.dtype(), h.shape()});
  }
  return d;
}

void DeviceArgs::download(std::vector<HostTensor>& host, const std::vector<int>& which) const {
  for (int i : which)
    buffers[i].download(host[i].data(), host[i].bytes());
}

std::string device_arch() {
  std::string why;
  auto info = rt::device_info(rt::selected_device_ordinal(), &why);
  if (!info) user_error() << "--backend cuda needs a GPU: " << why;
  return info->arch;
}

CheckResult check_cuda(const Operator& op, const Problem& p, CheckOptions o) {
  o.backend = "cuda";
  o.arch = device_arch();
  std::string arch = o.arch;
  // The problem and config ride with the launch: a fault's message names them beside the kernel.
  const std::string context = "checking " + op.name() + " " + p.shape_str() +
                              (o.config.empty() ? "" : " config " + config_str(o.config));
  auto run = [&](const KernelProgram& prog, std::vector<HostTensor>& args,
                 const std::vector<std::array<int64_t, 3>>&) {
    rt::ensure_context();
    rt::LaunchContext scope(context);
    DeviceArgs d = DeviceArgs::upload(args);
    CudaProgram cp(prog, arch);
    cp.launch(d.tensors);
    TILEPILOT_CU(rt::driver().cuCtxSynchronize());
    d.download(args, op.outputs(p));
  };
  return check_program_with(op, p, o, run);
}

} // namespace tp::ops
