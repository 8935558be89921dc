// The decode_attention operator: flash-decoding over a contiguous or paged KV cache with
// grouped heads, as an Operator (kernel, inputs and reference in DecodeAttention.h, the
// framework chain in DecodeAttentionFramework.h).
#pragma once
#include "ops/Operator.h"

namespace tp::ops {

class DecodeAttentionOp : public Operator {
public:
  std::string name() const override { return "decode_attention"; }
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
    return {{"B", "4"}, {"H", "32"}, {"Hkv", "8"}, {"D", "128"}, {"L", "1000"}};
  }
  std::string variant_label(const Problem& p) const override;
  std::vector<Knob> knobs(const std::string& arch) const override;
  Config default_config(const Problem& p, const std::string& arch) const override;
  void validate(const Problem& p, const Config& c) const override;
  Kernel build(const Problem& p, const Config& c) const override;
  /// splits > 1: the split kernel over the call's inputs into two intermediates (partials and
  /// their log-sum-exp), then the combine into out (SplitKv.h); otherwise build()'s one kernel.
  KernelProgram program(const Problem& p, const Config& c) const override;
  std::vector<ArgSpec> arg_specs(const Problem& p) const override;
  std::vector<HostTensor> make_args(const Problem& p, uint64_t seed) const override;
  std::vector<int> outputs(const Problem& p) const override;
  double flops(const Problem& p) const override;
  double min_bytes(const Problem& p) const override;
  std::vector<double> reference(const Problem& p, const std::vector<HostTensor>& args,
                                const Box& box) const override;
  std::string framework_name() const override;
  std::unique_ptr<Framework> framework(const Problem& p, const FrameworkOptions& o) const override;
  /// The head dim, the query tokens and the cache layout shape the kernel.
  std::set<std::string> exact_keys() const override { return {"D", "Sq", "paged", "block"}; }
  /// Only the ratio of grouped heads changes the kernel; per-batch lengths change nothing.
  Problem tuning_problem(const Problem& p) const override;
};

} // namespace tp::ops
