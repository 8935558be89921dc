// The three references behind make_reference(): cuBLASLt gemm, cuDNN attention, and the unfused
// fp32 GPU attention.
#include "perf/VendorReference.h"

#include "ops/reference/AttentionDesc.h"
#include "ops/reference/GpuReference.h"
#include "ops/vendor/CublasLt.h"
#include "ops/vendor/CudnnAttention.h"
#include "runtime/DeviceBuffer.h"
#include "tilepilot/error.h"

namespace tp::perf {

namespace {

size_t numel(const cuda::DeviceTensor& t) {
  size_t n = 1;
  for (int64_t e : t.shape)
    n *= static_cast<size_t>(e);
  return n;
}

class CublasLtReference : public VendorReference {
public:
  explicit CublasLtReference(const ops::Problem& p) : p_(p) {
    name_ = "cuBLASLt " + lt_.library().version_text();
  }
  void run(const std::vector<cuda::DeviceTensor>& a, CUstream s) override {
    lt_.run(p_, a.at(0).ptr, a.at(1).ptr, a.at(2).ptr, s);
  }
  OutputView output(const std::vector<cuda::DeviceTensor>& a) const override {
    return {a.at(2).ptr, a.at(2).dtype, numel(a.at(2))};
  }

private:
  ops::Problem p_;
  ops::CublasLtGemm lt_;
};

ops::AttentionPtrs attention_ptrs(const ops::AttentionDesc& d,
                                  const std::vector<cuda::DeviceTensor>& a) {
  ops::AttentionPtrs p{a.at(0).ptr, a.at(1).ptr, a.at(2).ptr, a.at(3).ptr};
  size_t next = 4; // LSE, then lens: AttentionOp's parameter order
  if (d.lse) p.lse = a.at(next++).ptr;
  if (d.lens) p.lens = a.at(next).ptr;
  return p;
}

class CudnnReference : public VendorReference {
public:
  CudnnReference(std::unique_ptr<ops::CudnnAttention> dnn, const ops::AttentionDesc& d)
      : dnn_(std::move(dnn)), d_(d) {
    name_ = "cuDNN " + dnn_->library().version_text();
  }
  void run(const std::vector<cuda::DeviceTensor>& a, CUstream s) override {
    dnn_->run(d_, attention_ptrs(d_, a), s);
  }
  OutputView output(const std::vector<cuda::DeviceTensor>& a) const override {
    return {a.at(3).ptr, a.at(3).dtype, numel(a.at(3))};
  }

private:
  std::unique_ptr<ops::CudnnAttention> dnn_;
  ops::AttentionDesc d_;
};

/// The fallback when cuDNN cannot run: O in f32 in its own buffer (the reference computes in
/// f32 and does not round to the input dtype), LSE (f32) straight into the LSE argument.
class UnfusedAttentionReference : public VendorReference {
public:
  UnfusedAttentionReference(const ops::AttentionDesc& d, const std::string& why)
      : d_(d), o32_(size_t(d.B * d.H * d.S * d.D) * sizeof(float)) {
    name_ = "unfused fp32 GPU reference";
    note_ = "fallback: cuDNN attention cannot run here (" + why + ")";
  }
  void run(const std::vector<cuda::DeviceTensor>& a, CUstream s) override {
    ops::AttentionPtrs p = attention_ptrs(d_, a);
    p.o = o32_.ptr();
    ops::gpu_reference_attention(d_, p, s);
  }
  OutputView output(const std::vector<cuda::DeviceTensor>&) const override {
    return {o32_.ptr(), DType::f32, o32_.bytes() / sizeof(float)};
  }

private:
  ops::AttentionDesc d_;
  rt::DeviceBuffer o32_;
};

} // namespace

std::unique_ptr<VendorReference> make_reference(const ops::Problem& p, bool allow_vendor) {
  if (p.dtype != DType::bf16 && p.dtype != DType::f16)
    user_error() << "no framework reference for " << p.op << " in " << dtype_name(p.dtype)
                 << ": cuBLASLt and cuDNN are used for bf16 and f16 only; use --dtype bf16";
  std::string why;
  if (p.op == "gemm") {
    if (!allow_vendor)
      user_error() << "gemm has no reference other than cuBLASLt; allow the vendor library";
    if (!ops::cublaslt_available(&why))
      user_error() << "the gemm reference (cuBLASLt) cannot run here: " << why;
    return std::make_unique<CublasLtReference>(p);
  }
  if (p.op == "attention") {
    ops::AttentionDesc d = ops::attention_desc(p);
    if (!allow_vendor) {
      why = "cuDNN not used: the caller asked for the unfused reference";
    } else if (ops::cudnn_attention_available(&why)) {
      auto dnn = std::make_unique<ops::CudnnAttention>();
      if (dnn->supports(d, &why)) return std::make_unique<CudnnReference>(std::move(dnn), d);
    }
    return std::make_unique<UnfusedAttentionReference>(d, why);
  }
  user_error() << "no framework reference for operator '" << p.op << "'";
  return nullptr;
}

} // namespace tp::perf
