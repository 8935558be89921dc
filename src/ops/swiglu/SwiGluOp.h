// The swiglu operator: silu(gate) * up over a fused gate/up projection's output, as an
// Operator (the kernel, references and framework chain are in SwiGlu.h and SwiGluFramework.h).
#pragma once
#include "ops/Operator.h"

namespace tp::ops {

class SwiGluOp : public Operator {
public:
  std::string name() const override { return "swiglu"; }
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
    return {{"T", "7"}, {"I", "14336"}};
  }
  std::vector<Knob> knobs(const std::string& arch) const override;
  Config default_config(const Problem& p, const std::string& arch) const override;
  void validate(const Problem& p, const Config& c) const override;
  Kernel build(const Problem& p, const Config& c) const override;
  std::vector<ArgSpec> arg_specs(const Problem& p) const override;
  std::vector<HostTensor> make_args(const Problem& p, uint64_t seed) const override;
  std::vector<int> outputs(const Problem&) const override { return {1}; }
  double flops(const Problem& p) const override;
  double min_bytes(const Problem& p) const override;
  std::vector<double> reference(const Problem& p, const std::vector<HostTensor>& args,
                                const Box& box) const override;
  std::string framework_name() const override;
  std::unique_ptr<Framework> framework(const Problem& p, const FrameworkOptions& o) const override;
};

} // namespace tp::ops
