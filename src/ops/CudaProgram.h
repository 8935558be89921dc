// A kernel program (tilepilot/operator.h) compiled for the current GPU: one CudaKernel per
// step, launched in order on one stream with the call's tensors and the program's
// intermediates. Intermediates are allocated on first use per (device, stream) and kept until
// the program is destroyed: launches on one stream run in order, so calls never overlap on one
// set, and launches on different streams (or devices) never share one. Finding them is guarded
// by a lock; the steps' CudaKernels are not, so calls into one program from several threads
// must not overlap (dispatch holds its device lock, the tuner has one program per device).
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "compile/CudaKernel.h"
#include "ops/Operator.h"

namespace tp::ops {

class CudaProgram {
public:
  /// `arch` is the device's ("sm_90a"); `bypass_cache` forces NVRTC for every step.
  CudaProgram(KernelProgram prog, std::string arch, bool bypass_cache = false);
  ~CudaProgram();
  CudaProgram(const CudaProgram&) = delete;
  CudaProgram& operator=(const CudaProgram&) = delete;

  /// Launches every step on `stream` over `args` (the call's tensors, arg_specs order).
  void launch(const std::vector<cuda::DeviceTensor>& args, CUstream stream = nullptr);
  /// Compiles and loads every step's variant for `args` without launching. The timings are
  /// the steps' summed; registers is the most any step uses, cache_hit whether all hit.
  cuda::CompileTimings prepare(const std::vector<cuda::DeviceTensor>& args);

  const KernelProgram& program() const { return prog_; }
  /// Step s's compiled kernel (its lowered code, its own timings).
  cuda::CudaKernel& step(size_t s) { return *steps_.at(s); }

private:
  struct Scratch {
    int ordinal = 0;
    std::vector<rt::DeviceBuffer> buffers;
    std::vector<cuda::DeviceTensor> tensors;
  };
  /// The intermediates of the calling thread's device and `stream`, allocated on first use.
  const std::vector<cuda::DeviceTensor>& scratch(CUstream stream);
  std::vector<cuda::DeviceTensor> bound(size_t s, const std::vector<cuda::DeviceTensor>& args,
                                        const std::vector<cuda::DeviceTensor>& scratch) const;

  KernelProgram prog_;
  std::vector<std::unique_ptr<cuda::CudaKernel>> steps_;
  std::mutex mu_; // guards scratch_ (a map node, once made, is never moved)
  std::map<std::pair<int, CUstream>, Scratch> scratch_;
};

} // namespace tp::ops
