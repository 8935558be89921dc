// The grouped_gemm operator: a mixture of experts' per-expert GEMMs over tokens stacked by
// expert, with run-time row counts, as an Operator (kernel, inputs, references and framework
// in GroupedGemm.h).
#pragma once
#include "ops/Operator.h"

namespace tp::ops {

class GroupedGemmOp : public Operator {
public:
  std::string name() const override { return "grouped_gemm"; }
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
    return {{"E", "8"}, {"R", "512"}, {"N", "1024"}, {"K", "1024"}};
  }
  std::string variant_label(const Problem& p) const override;
  std::vector<Knob> knobs(const std::string& arch) const override;
  Config default_config(const Problem& p, const std::string& arch) const override;
  void validate(const Problem& p, const Config& c) const override;
  Kernel build(const Problem& p, const Config& c) const override;
  std::vector<ArgSpec> arg_specs(const Problem& p) const override;
  std::vector<HostTensor> make_args(const Problem& p, uint64_t seed) const override;
  std::vector<int> outputs(const Problem&) const override { return {3}; }
  /// The rows of the block's tile in the problem's own counts (what make_args writes into
  /// offs); no box for a block past the tile list.
  std::vector<Box> block_outputs(const Problem& p, const Config& c,
                                 const std::array<int64_t, 3>& block) const override;
  double flops(const Problem& p) const override;
  double min_bytes(const Problem& p) const override;
  std::vector<double> reference(const Problem& p, const std::vector<HostTensor>& args,
                                const Box& box) const override;
  int64_t reduction_length(const Problem& p) const override { return p.at("K"); }
  bool gpu_reference(const Problem& p, const std::vector<DeviceTensor>& args,
                     const std::vector<DeviceTensor>& out_f32, Stream s) const override;
  std::string framework_name() const override;
  std::unique_ptr<Framework> framework(const Problem& p, const FrameworkOptions& o) const override;
  /// The fp64 reference over the experts' rows of the offs in `args` (not the problem's).
  void run_host_framework(const Problem& p, std::vector<HostTensor>& args) const override;
  /// E is compiled into the kernel; the layout picks another kernel.
  std::set<std::string> exact_keys() const override { return {"E", "layout"}; }
  /// The routing (counts) is run-time data: it is not part of a tuning key.
  Problem tuning_problem(const Problem& p) const override;
};

} // namespace tp::ops
