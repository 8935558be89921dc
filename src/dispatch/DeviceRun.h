// Dispatch on device tensors: the pinned kernel through the CUDA backend, and the fallbacks -
// cuBLASLt for gemm, cuDNN SDPA for attention, and when those libraries are missing (or cuDNN
// does not run a problem) the unfused fp32 GPU references followed by a conversion into the
// output dtype. Not thread-safe: the Dispatcher serializes calls into one DeviceRun.
#pragma once
#include <functional>
#include <memory>
#include <set>
#include <string>

#include "codegen/cuda/CudaKernel.h"
#include "ops/Operator.h"
#include "runtime/DeviceBuffer.h"
#include "tilepilot/dispatch.h"

namespace tp::ops {
class CublasLtGemm;
class CudnnAttention;
} // namespace tp::ops

namespace tp::dispatch {

/// NVRTC-compiles the f32 -> bf16/f16 conversion the reference fallbacks use, for `arch`,
/// without a GPU (CI checks it).
void compile_convert_kernel(const std::string& arch);

/// GPU 0 (or $TILEPILOT_DEVICE) as releases see it; user error when there is no usable GPU.
ops::DeviceIdentity current_device();

class DeviceRun {
public:
  /// `note(key, line)` reports a degraded fallback (library missing or refusing a problem); the
  /// dispatcher logs each key once. `disabled` lists libraries to treat as missing.
  DeviceRun(std::set<std::string> disabled,
            std::function<void(const std::string& key, const std::string& line)> note);
  ~DeviceRun();

  /// The pinned kernel for this device (nothing is compiled yet).
  std::shared_ptr<cuda::CudaKernel> kernel(const Kernel& k);
  /// Compiles and loads the variant of `ck` these arguments need (a no-op once loaded). Throws
  /// on failure; `*missing` says whether a library it needs (NVRTC) is the cause.
  void prepare(cuda::CudaKernel& ck, const std::vector<cuda::DeviceTensor>& args, bool* missing);

  /// Runs the fallback of `p` (args: inputs then output) on `stream`; returns its name.
  std::string fallback(const ops::Problem& p, const std::vector<cuda::DeviceTensor>& args,
                       CUstream stream);

private:
  std::string gemm_fallback(const ops::Problem& p, const std::vector<cuda::DeviceTensor>& a,
                            CUstream s);
  std::string attention_fallback(const ops::Problem& p, const std::vector<cuda::DeviceTensor>& a,
                                 CUstream s);
  /// `n` f32 values at `src` into `dst` as `dtype` (round to nearest even), on `stream`.
  void convert(CUdeviceptr src, CUdeviceptr dst, int64_t n, DType dtype, CUstream stream);
  /// A device scratch buffer of at least `bytes`, reused across calls.
  CUdeviceptr scratch(size_t bytes);
  bool disabled(const std::string& lib) const { return disabled_.count(lib) > 0; }

  std::set<std::string> disabled_;
  std::function<void(const std::string&, const std::string&)> note_;
  std::string arch_;
  std::unique_ptr<ops::CublasLtGemm> cublaslt_;
  std::unique_ptr<ops::CudnnAttention> cudnn_;
  std::string cublaslt_missing_, cudnn_missing_; // why not, once tried
  rt::DeviceBuffer scratch_;
  CUfunction convert_fn_ = nullptr;
};

} // namespace tp::dispatch
