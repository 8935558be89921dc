// Attention's framework operator: cuDNN's fused attention (what SDPA runs on the GPU) where the
// library loads and runs the problem; otherwise the unfused fp32 GPU reference, rounded into O's
// dtype, which says why in its note so that no report calls it cuDNN.
#include <algorithm>

#include "ops/attention/AttentionOp.h"
#include "ops/reference/GpuReference.h"
#include "ops/vendor/CudnnAttention.h"
#include "runtime/DeviceBuffer.h"
#include "runtime/DeviceConvert.h"

namespace tp::ops {

namespace {

/// `d` with the strides of the call's Q, K, V and O views (AttentionOp::strided_arg); all
/// zero, meaning contiguous, for a tensor passed without strides.
AttentionDesc with_strides(AttentionDesc d, const std::vector<DeviceTensor>& a) {
  std::array<int64_t, 4>* out[4] = {&d.q_stride, &d.k_stride, &d.v_stride, &d.o_stride};
  for (int i = 0; i < 4; ++i) {
    *out[i] = {};
    const std::vector<int64_t>& st = a.at(i).strides;
    if (st.size() == 4) std::copy(st.begin(), st.end(), out[i]->begin());
  }
  return d;
}

AttentionPtrs attention_ptrs(const AttentionDesc& d, const std::vector<DeviceTensor>& a) {
  AttentionPtrs p{a.at(0).ptr, a.at(1).ptr, a.at(2).ptr, a.at(3).ptr};
  size_t next = 4; // LSE, then lens: the kernel's parameter order
  if (d.lse) p.lse = a.at(next++).ptr;
  if (d.lens) p.lens = a.at(next).ptr;
  return p;
}

bool has_empty_sequence(const Problem& p) {
  for (int64_t len : AttentionOp::key_lengths(p))
    if (len == 0) return true;
  return false;
}

class CudnnFramework : public Framework {
public:
  CudnnFramework(std::unique_ptr<CudnnAttention> dnn, const AttentionDesc& d)
      : dnn_(std::move(dnn)), d_(d) {}
  std::string name() const override { return "cuDNN " + dnn_->library().version_text(); }
  void run(const std::vector<DeviceTensor>& a, Stream s) override {
    // cuDNN keeps one plan per description, strides included.
    const AttentionDesc d = with_strides(d_, a);
    dnn_->run(d, attention_ptrs(d, a), reinterpret_cast<CUstream>(s));
  }

private:
  std::unique_ptr<CudnnAttention> dnn_;
  AttentionDesc d_;
};

class UnfusedFramework : public Framework {
public:
  UnfusedFramework(const AttentionDesc& d, std::string why)
      : d_(d), why_(std::move(why)), o32_(size_t(d.B * d.H * d.S * d.D) * sizeof(float)) {}
  std::string name() const override { return "unfused fp32 GPU reference"; }
  std::string note() const override {
    return "fallback: cuDNN attention cannot run here (" + why_ + ")";
  }
  void run(const std::vector<DeviceTensor>& a, Stream s) override {
    CUstream cs = reinterpret_cast<CUstream>(s);
    AttentionDesc d = with_strides(d_, a);
    const std::array<int64_t, 4> o_strides = d.o_strides();
    d.o_stride = {}; // the fp32 result is contiguous: o32_
    AttentionPtrs p = attention_ptrs(d, a);
    const CUdeviceptr o = p.o;
    p.o = o32_.ptr();
    gpu_reference_attention(d, p, cs);
    rt::convert_f32_to_view(o32_.ptr(), o, {d.B, d.H, d.S, d.D}, o_strides, d.dtype, cs);
  }

private:
  AttentionDesc d_;
  std::string why_;
  rt::DeviceBuffer o32_;
};

} // namespace

std::unique_ptr<Framework> AttentionOp::framework(const Problem& p,
                                                  const FrameworkOptions& o) const {
  if (p.dtype != DType::bf16 && p.dtype != DType::f16)
    user_error() << "attention: no framework operator runs " << dtype_name(p.dtype)
                 << " (cuDNN and the GPU reference take bf16 or f16); use --dtype bf16";
  AttentionDesc d = attention_desc(p);
  std::string why;
  if (o.disabled_libraries.count("cuDNN")) {
    why = "cuDNN is disabled (DispatchOptions::disable_libraries)";
  } else if (!o.allow_vendor) {
    why = "cuDNN not used: the caller asked for the unfused reference";
  } else if (has_empty_sequence(p)) {
    // cuDNN 9.14 returns NaN for every row of a zero-length padded sequence, where the
    // operator's semantics give O = 0 and LSE = -inf (H200, 2026-12-01, GpuCudnnAttention
    // lens_zero): such problems run the unfused reference.
    why = "cuDNN returns NaN for a zero-length sequence (lens has a 0)";
  } else if (cudnn_attention_available(&why)) {
    auto dnn = std::make_unique<CudnnAttention>();
    if (dnn->supports(d, &why)) return std::make_unique<CudnnFramework>(std::move(dnn), d);
    if (o.note)
      o.note("attention/cuDNN/" + d.key(),
             "attention: " + why + "; this problem runs the unfused GPU reference (slow)");
    return std::make_unique<UnfusedFramework>(d, why);
  }
  if (o.note)
    o.note("attention/cuDNN", "attention: cuDNN is unavailable (" + why +
                                  "); attention fallbacks run the unfused GPU reference (slow)");
  return std::make_unique<UnfusedFramework>(d, why);
}

bool AttentionOp::gpu_reference(const Problem& p, const std::vector<DeviceTensor>& a,
                                const std::vector<DeviceTensor>& out, Stream s) const {
  if (p.dtype != DType::bf16 && p.dtype != DType::f16) return false;
  AttentionDesc d = attention_desc(p);
  AttentionPtrs ptrs{a.at(0).ptr, a.at(1).ptr, a.at(2).ptr, out.at(0).ptr};
  if (d.lse) ptrs.lse = out.at(1).ptr;
  if (d.lens) ptrs.lens = a.back().ptr; // lens is the last parameter
  gpu_reference_attention(d, ptrs, reinterpret_cast<CUstream>(s));
  return true;
}

} // namespace tp::ops
