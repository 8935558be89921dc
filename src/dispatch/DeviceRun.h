// Dispatch on device tensors: the pinned kernel through the CUDA backend, and the fallback -
// the operator's framework operator (Operator::framework), made once per problem and kept.
// Not thread-safe: the Dispatcher serializes calls into one DeviceRun.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "compile/CudaKernel.h"
#include "ops/CudaProgram.h"
#include "ops/Operator.h"
#include "tilepilot/dispatch.h"

namespace tp::dispatch {

/// GPU 0 (or $TILEPILOT_DEVICE) as releases see it; user error when there is no usable GPU.
ops::DeviceIdentity current_device();

class DeviceRun {
public:
  /// `note(key, line)` reports a degraded fallback (library missing or refusing a problem); the
  /// dispatcher logs each key once. `disabled` lists libraries to treat as missing.
  DeviceRun(std::set<std::string> disabled,
            std::function<void(const std::string& key, const std::string& line)> note);
  ~DeviceRun();

  /// The pinned kernel program for this device (nothing is compiled yet).
  std::shared_ptr<ops::CudaProgram> kernel(const ops::KernelProgram& prog);
  /// Compiles and loads the variants of `ck`'s steps these arguments need (a no-op once
  /// loaded). Throws on failure; `*missing` says whether a library it needs (NVRTC) is the cause.
  void prepare(ops::CudaProgram& ck, const std::vector<cuda::DeviceTensor>& args, bool* missing);

  /// Runs the framework operator of `p` (args in the kernel's parameter order) on `stream`;
  /// returns its name.
  std::string fallback(const ops::Problem& p, const std::vector<cuda::DeviceTensor>& args,
                       CUstream stream);

private:
  bool disabled(const std::string& lib) const { return disabled_.count(lib) > 0; }

  std::set<std::string> disabled_;
  std::function<void(const std::string&, const std::string&)> note_;
  std::string arch_;
  std::map<std::string, std::unique_ptr<ops::Framework>> frameworks_; // by problem
};

} // namespace tp::dispatch
