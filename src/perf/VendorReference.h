// The framework operator ours is timed against and falls back to, run on the same device
// tensors as ours: cuBLASLt for gemm; cuDNN's fused attention for attention, or, where cuDNN is
// not loadable or does not run the problem, the unfused fp32 GPU reference - which then says so
// in note(), so that no report calls it cuDNN.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "codegen/cuda/CudaKernel.h"
#include "ops/Operator.h"

namespace tp::perf {

/// Where a reference leaves its main output (gemm C, attention O).
struct OutputView {
  CUdeviceptr ptr = 0;
  DType dtype = DType::f32;
  size_t count = 0;
};

class VendorReference {
public:
  virtual ~VendorReference() = default;
  /// "cuBLASLt 13.1.0", "cuDNN 9.14.0", "unfused fp32 GPU reference".
  const std::string& name() const { return name_; }
  /// Why the unfused reference stands in for cuDNN ("cuDNN unavailable: ..."); "" otherwise.
  const std::string& note() const { return note_; }
  /// True for cuBLASLt and cuDNN; false for the unfused GPU reference.
  bool is_vendor() const { return note_.empty(); }

  /// Enqueues the operator on `stream` over `args`, in the operator's parameter order (gemm:
  /// A, B, C; attention: Q, K, V, O, then LSE and lens when the problem has them).
  virtual void run(const std::vector<cuda::DeviceTensor>& args, CUstream stream) = 0;
  /// The main output after run(): the output tensor in `args`, or the reference's own f32
  /// buffer for the unfused attention reference (it computes in f32).
  virtual OutputView output(const std::vector<cuda::DeviceTensor>& args) const = 0;

protected:
  std::string name_, note_;
};

/// The reference for `p` on the current GPU. User error saying what is missing when there is
/// none: no GPU, cuBLASLt not loadable (gemm), a dtype the vendor library does not run.
/// `allow_vendor` false picks the unfused attention reference even where cuDNN runs (to test
/// that fallback on a machine that has cuDNN); gemm has no such stand-in (user error).
std::unique_ptr<VendorReference> make_reference(const ops::Problem& p, bool allow_vendor = true);

} // namespace tp::perf
