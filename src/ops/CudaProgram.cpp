// CudaProgram: a program's steps compiled once and launched in order.
#include "ops/CudaProgram.h"

#include <algorithm>

#include "runtime/Driver.h"
#include "runtime/ThreadDevice.h"

namespace tp::ops {

CudaProgram::CudaProgram(KernelProgram prog, std::string arch, bool bypass_cache)
    : prog_(std::move(prog)) {
  for (const KernelStep& s : prog_.steps)
    steps_.push_back(std::make_unique<cuda::CudaKernel>(s.kernel, arch, bypass_cache));
}

CudaProgram::~CudaProgram() {
  // Each device's intermediates go back with that device's context current.
  for (auto& [key, s] : scratch_) {
    if (s.buffers.empty()) continue;
    rt::DeviceScope on(s.ordinal);
    try {
      rt::ensure_context();
    } catch (const std::exception&) {}
    s.buffers.clear();
  }
}

const std::vector<cuda::DeviceTensor>& CudaProgram::scratch(CUstream stream) {
  const int ordinal = rt::thread_device_ordinal();
  std::lock_guard<std::mutex> g(mu_);
  auto [it, fresh] = scratch_.try_emplace({ordinal, stream});
  Scratch& s = it->second;
  if (fresh) {
    try {
      s.ordinal = ordinal;
      rt::ensure_context();
      for (const ArgSpec& a : prog_.intermediates) {
        size_t bytes = dtype_bytes(a.dtype);
        for (int64_t e : a.shape)
          bytes *= static_cast<size_t>(e);
        s.buffers.emplace_back(std::max<size_t>(bytes, 16));
        // All ones: NaN in every float dtype, so a step reading what no step wrote shows up
        // in a check instead of reading zeros that happen to pass.
        s.buffers.back().memset(0xff);
        s.tensors.push_back({s.buffers.back().ptr(), a.dtype, a.shape});
      }
    } catch (...) {
      scratch_.erase(it); // out of memory now is no reason never to try again
      throw;
    }
  }
  return s.tensors;
}

std::vector<cuda::DeviceTensor>
CudaProgram::bound(size_t s, const std::vector<cuda::DeviceTensor>& args,
                   const std::vector<cuda::DeviceTensor>& scratch) const {
  std::vector<cuda::DeviceTensor> out;
  for (int b : prog_.steps.at(s).args)
    out.push_back(b < static_cast<int>(args.size()) ? args.at(b) : scratch.at(b - args.size()));
  return out;
}

namespace {
const std::vector<cuda::DeviceTensor> kNone;
} // namespace

void CudaProgram::launch(const std::vector<cuda::DeviceTensor>& args, CUstream stream) {
  const std::vector<cuda::DeviceTensor>& mid =
      prog_.intermediates.empty() ? kNone : scratch(stream);
  for (size_t s = 0; s < steps_.size(); ++s) {
    // A step over the call's arguments in order (every one-kernel operator) takes them as
    // they are: no copy of the tensors (and their shapes) on the per-call path.
    const std::vector<int>& b = prog_.steps[s].args;
    bool in_order = b.size() == args.size();
    for (size_t i = 0; in_order && i < b.size(); ++i)
      in_order = b[i] == static_cast<int>(i);
    if (in_order)
      steps_[s]->launch(args, stream);
    else
      steps_[s]->launch(bound(s, args, mid), stream);
  }
}

cuda::CompileTimings CudaProgram::prepare(const std::vector<cuda::DeviceTensor>& args) {
  const std::vector<cuda::DeviceTensor>& mid =
      prog_.intermediates.empty() ? kNone : scratch(nullptr);
  cuda::CompileTimings sum;
  sum.cache_hit = true;
  for (size_t s = 0; s < steps_.size(); ++s) {
    const cuda::CompileTimings& t = steps_[s]->prepare(bound(s, args, mid));
    sum.passes += t.passes;
    sum.nvrtc += t.nvrtc;
    sum.module_load += t.module_load;
    sum.lookup += t.lookup;
    sum.cache_hit = sum.cache_hit && t.cache_hit;
    sum.registers = std::max(sum.registers, t.registers);
  }
  return sum;
}

} // namespace tp::ops
