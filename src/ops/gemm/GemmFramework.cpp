// GEMM's framework operator: cuBLASLt, what torch.matmul runs on the GPU. Where cuBLASLt is
// missing (or disabled for a test) the fp32 GPU reference stands in, rounded into C's dtype,
// and says so in its note, so that no report calls it cuBLASLt.
#include "ops/gemm/GemmOp.h"
#include "ops/reference/GpuReference.h"
#include "ops/vendor/CublasLt.h"
#include "runtime/DeviceBuffer.h"
#include "runtime/DeviceConvert.h"

namespace tp::ops {

namespace {

class CublasLtFramework : public Framework {
public:
  explicit CublasLtFramework(const Problem& p) : p_(p) {}
  std::string name() const override { return "cuBLASLt " + lt_.library().version_text(); }
  void run(const std::vector<DeviceTensor>& a, Stream s) override {
    lt_.run(p_, a.at(0).ptr, a.at(1).ptr, a.at(2).ptr, reinterpret_cast<CUstream>(s));
  }

private:
  Problem p_;
  mutable CublasLtGemm lt_;
};

class ReferenceGemmFramework : public Framework {
public:
  ReferenceGemmFramework(const Problem& p, std::string why)
      : p_(p), why_(std::move(why)), c32_(size_t(p.at("M") * p.at("N")) * sizeof(float)) {}
  std::string name() const override { return "fp32 GPU reference"; }
  std::string note() const override { return "fallback: cuBLASLt cannot run here (" + why_ + ")"; }
  void run(const std::vector<DeviceTensor>& a, Stream s) override {
    const int64_t M = p_.at("M"), N = p_.at("N"), K = p_.at("K");
    CUstream cs = reinterpret_cast<CUstream>(s);
    gpu_reference_gemm(p_.dtype, p_.options.at("layout"), M, N, K, a.at(0).ptr, a.at(1).ptr,
                       c32_.ptr(), cs);
    rt::convert_f32(c32_.ptr(), a.at(2).ptr, M * N, p_.dtype, cs);
  }

private:
  Problem p_;
  std::string why_;
  rt::DeviceBuffer c32_;
};

} // namespace

std::unique_ptr<Framework> GemmOp::framework(const Problem& p, const FrameworkOptions& o) const {
  if (p.dtype != DType::bf16 && p.dtype != DType::f16)
    user_error() << "gemm: no framework operator runs " << dtype_name(p.dtype)
                 << " here (cuBLASLt and the GPU reference take bf16 or f16); use --dtype bf16";
  std::string why;
  if (o.disabled_libraries.count("cuBLASLt"))
    why = "cuBLASLt is disabled (DispatchOptions::disable_libraries)";
  else if (!o.allow_vendor)
    why = "the caller asked for the stand-in";
  else if (cublaslt_available(&why))
    return std::make_unique<CublasLtFramework>(p);
  if (o.note)
    o.note("gemm/cuBLASLt", "gemm: cuBLASLt is unavailable (" + why +
                                "); gemm fallbacks run the fp32 GPU reference (slow)");
  return std::make_unique<ReferenceGemmFramework>(p, why);
}

bool GemmOp::gpu_reference(const Problem& p, const std::vector<DeviceTensor>& a,
                           const std::vector<DeviceTensor>& out, Stream s) const {
  if (p.dtype != DType::bf16 && p.dtype != DType::f16) return false;
  gpu_reference_gemm(p.dtype, p.options.at("layout"), p.at("M"), p.at("N"), p.at("K"), a.at(0).ptr,
                     a.at(1).ptr, out.at(0).ptr, reinterpret_cast<CUstream>(s));
  return true;
}

void GemmOp::run_host_framework(const Problem& p, std::vector<HostTensor>& args) const {
  // One box over all of C: the reference decodes each operand row once for the whole box.
  std::vector<double> ref = reference(p, args, Box{2, {0, 0}, {p.at("M"), p.at("N")}});
  for (size_t i = 0; i < ref.size(); ++i)
    args[2].set(static_cast<int64_t>(i), ref[i]);
}

} // namespace tp::ops
