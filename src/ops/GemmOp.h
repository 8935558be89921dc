// GEMM: C[M, N] = op(A) * op(B), bf16/f16 (or f32) inputs, f32 accumulation, output in the input
// dtype. Layouts: nn (A [M, K], B [K, N]), nt (B given as [N, K]), tn (A given as [K, M]).
#pragma once
#include "ops/Operator.h"

namespace tp::ops {

/// The tile-language GEMM kernel for a layout and config (knobs bm, bn, bk, stages, threads,
/// swizzle). Dims M, N, K are bound at launch.
Kernel gemm_kernel(DType dtype, const std::string& layout, const Config& c);

class GemmOp : public Operator {
public:
  std::string name() const override { return "gemm"; }
  std::string summary() const override;
  std::vector<std::pair<std::string, std::string>> shape_keys() const override;
  std::vector<Knob> knobs() const override;
  Problem parse(const std::map<std::string, std::string>& kv, DType dtype) const override;
  Config default_config(const Problem& p, const std::string& arch) const override;
  void validate(const Problem& p, const Config& c) const override;
  Kernel build(const Problem& p, const Config& c) const override;
  std::vector<HostTensor> make_args(const Problem& p, uint64_t seed) const override;
  std::vector<int> outputs(const Problem&) const override { return {2}; }
  std::vector<double> reference(const Problem& p, const std::vector<HostTensor>& args,
                                const Box& box) const override;
  std::vector<Box> block_outputs(const Problem& p, const Config& c,
                                 const std::array<int64_t, 3>& block) const override;
  std::array<int64_t, 3> grid(const Problem& p, const Config& c) const override;
  double flops(const Problem& p) const override;
  int64_t reduction_length(const Problem& p) const override { return p.at("K"); }
  double min_bytes(const Problem& p) const override;
};

} // namespace tp::ops
