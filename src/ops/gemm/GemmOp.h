// GEMM: C[M, N] = op(A) * op(B), bf16/f16 (or f32) inputs, f32 accumulation, output in the input
// dtype. Layouts: nn (A [M, K], B [K, N]), nt (B given as [N, K]), tn (A given as [K, M]).
// The framework operator is cuBLASLt (GemmFramework.cpp); the tuner's cost model is in
// GemmTuning.cpp; the split-K kernels for decode shapes (knob splits) in GemmSplitK.h.
#pragma once
#include "ops/Operator.h"

namespace tp::ops {

/// The tile-language GEMM kernel for a layout and config (knobs bm, bn, bk, stages, threads,
/// swizzle, cluster, persistent; splits is the program's, not this kernel's). Dims M, N, K are
/// bound at launch.
Kernel gemm_kernel(DType dtype, const std::string& layout, const Config& c);

/// Whether the compiler's plan of `c` fits the arch's shared memory (true for 2-byte dtypes,
/// which every default candidate fits, without planning).
bool fits_shared_memory(const Operator& gemm, const Problem& p, const Config& c,
                        const std::string& arch);
/// `c` with its stages lowered (not below 2) until the compiler's plan fits the arch's shared
/// memory: the defaults' stage counts are sized for 2-byte operands, and f32 tiles are twice
/// as large. Unchanged for bf16 and f16.
Config fit_stages(const Operator& gemm, const Problem& p, Config c, const std::string& arch);

/// Rows of C up to which the sm_90a default is split-K's decode kernel (one block row).
constexpr int64_t kDecodeRows = 64;

class GemmOp : public Operator {
public:
  std::string name() const override { return "gemm"; }
  std::string summary() const override;
  std::vector<std::pair<std::string, std::string>> shape_keys() const override;
  Problem parse(const std::map<std::string, std::string>& kv, DType dtype) const override;
  std::map<std::string, std::string> example_shape() const override {
    return {{"M", "128"}, {"N", "128"}, {"K", "128"}};
  }
  Problem problem_for(const std::vector<std::vector<int64_t>>& shapes,
                      const std::vector<DType>& dtypes,
                      const std::map<std::string, std::string>& options) const override;

  std::vector<Knob> knobs(const std::string& arch) const override;
  Config default_config(const Problem& p, const std::string& arch) const override;
  void validate(const Problem& p, const Config& c) const override;

  Kernel build(const Problem& p, const Config& c) const override;
  /// splits > 1: the split kernel over A and B into the f32 partials, then the combine into C
  /// (GemmSplitK.h); otherwise build()'s one kernel.
  KernelProgram program(const Problem& p, const Config& c) const override;
  std::vector<ArgSpec> arg_specs(const Problem& p) const override;
  std::vector<HostTensor> make_args(const Problem& p, uint64_t seed) const override;
  std::vector<int> outputs(const Problem&) const override { return {2}; }
  double flops(const Problem& p) const override;
  double min_bytes(const Problem& p) const override;

  std::vector<double> reference(const Problem& p, const std::vector<HostTensor>& args,
                                const Box& box) const override;
  int64_t reduction_length(const Problem& p) const override { return p.at("K"); }
  bool gpu_reference(const Problem& p, const std::vector<DeviceTensor>& args,
                     const std::vector<DeviceTensor>& out_f32, Stream s) const override;

  std::string framework_name() const override { return "cuBLASLt"; }
  std::unique_ptr<Framework> framework(const Problem& p, const FrameworkOptions& o) const override;
  void run_host_framework(const Problem& p, std::vector<HostTensor>& args) const override;

  /// Decode shapes (M <= kDecodeRows) take another kernel (split-K's 64-row tiles): a tuning key
  /// says which, and a model's decode GEMM never borrows a prefill shape's config (nor the
  /// reverse).
  Problem tuning_problem(const Problem& p) const override;
  std::set<std::string> exact_keys() const override { return {"decode"}; }
  Estimate estimate(const Problem& p, const Config& c, const std::string& arch) const override;
  double score(const Problem& p, const Config& c, int sm_count) const override;
};

} // namespace tp::ops
