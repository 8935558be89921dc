// The w4a16_gemm operator: C[M, N] = A[M, K] dequant(W), bf16 activations and int4 weights
// packed 8 per i32 word along K with group-wise scales (W4a16Gemm.h has the packing), as an
// Operator. The kernel and fp64 reference are in W4a16Gemm.h, the framework chain
// (dequantize + cuBLASLt) in W4a16GemmFramework.h.
#pragma once
#include "ops/Operator.h"

namespace tp::ops {

class W4a16GemmOp : public Operator {
public:
  std::string name() const override { return "w4a16_gemm"; }
  std::string summary() const override;
  std::vector<std::pair<std::string, std::string>> shape_keys() const override;
  Problem parse(const std::map<std::string, std::string>& kv, DType dtype) const override;
  Problem problem_for(const std::vector<std::vector<int64_t>>& shapes,
                      const std::vector<DType>& dtypes,
                      const std::map<std::string, std::string>& options) const override;
  Problem problem_from_inputs(const std::vector<std::vector<int64_t>>& shapes,
                              const std::vector<DType>& dtypes,
                              const std::map<std::string, std::string>& options) const override;
  std::map<std::string, std::string> example_shape() const override {
    return {{"M", "16"}, {"N", "4096"}, {"K", "4096"}, {"group", "128"}};
  }
  std::vector<Knob> knobs(const std::string& arch) const override;
  Config default_config(const Problem& p, const std::string& arch) const override;
  void validate(const Problem& p, const Config& c) const override;
  Kernel build(const Problem& p, const Config& c) const override;
  KernelProgram program(const Problem& p, const Config& c) const override;
  std::vector<ArgSpec> arg_specs(const Problem& p) const override;
  std::vector<HostTensor> make_args(const Problem& p, uint64_t seed) const override;
  std::vector<int> outputs(const Problem&) const override { return {3}; }
  double flops(const Problem& p) const override;
  double min_bytes(const Problem& p) const override;
  std::vector<double> reference(const Problem& p, const std::vector<HostTensor>& args,
                                const Box& box) const override;
  int64_t reduction_length(const Problem& p) const override { return p.at("K"); }
  bool gpu_reference(const Problem& p, const std::vector<DeviceTensor>& args,
                     const std::vector<DeviceTensor>& out_f32, Stream s) const override;
  std::string framework_name() const override;
  std::unique_ptr<Framework> framework(const Problem& p, const FrameworkOptions& o) const override;
  /// The group size picks the kernel (a compile-time constant), not a size.
  std::set<std::string> exact_keys() const override { return {"group"}; }
};

} // namespace tp::ops
