// Attention forward (FlashAttention-style online softmax):
//   O[b, h, i, :] = softmax(scale * Q[b, h, i, :] . K[b, hk, j, :]^T over valid j) V[b, hk, j, :]
// with hk = h / (H / Hkv) (grouped heads). Tensors are [B, heads, seq, D]. A key j is valid when
// j < L_b (L_b = lens[b] for padded batches, else Skv) and, when causal, j <= i + L_b - S
// (bottom-right aligned, as FlashAttention defines it). A row with no valid key outputs 0 and
// log-sum-exp -inf. The optional LSE output [B, H, S] is the natural-log log-sum-exp of the
// scaled scores.
#pragma once
#include "ops/Operator.h"

namespace tp::ops {

struct AttentionVariant {
  DType dtype = DType::bf16;
  int64_t D = 128;
  bool causal = false;
  bool lens = false; // per-batch key lengths tensor
  bool lse = false;  // log-sum-exp output
  double scale = 0;  // 0: 1/sqrt(D)
};

/// The tile-language attention kernel (knobs bm, bn, stages, threads). Parameters in order:
/// Q, K, V, O, then LSE and lens when the variant has them.
Kernel attention_kernel(const AttentionVariant& v, const Config& c);

class AttentionOp : public Operator {
public:
  std::string name() const override { return "attention"; }
  std::string summary() const override;
  std::vector<std::pair<std::string, std::string>> shape_keys() const override;
  Problem parse(const std::map<std::string, std::string>& kv, DType dtype) const override;
  std::map<std::string, std::string> example_shape() const override {
    return {{"B", "1"}, {"H", "1"}, {"S", "128"}, {"D", "128"}};
  }
  Problem problem_for(const std::vector<std::vector<int64_t>>& shapes,
                      const std::vector<DType>& dtypes,
                      const std::map<std::string, std::string>& options) const override;
  std::string variant_label(const Problem& p) const override;

  std::vector<Knob> knobs(const std::string& arch) const override;
  Config default_config(const Problem& p, const std::string& arch) const override;
  void validate(const Problem& p, const Config& c) const override;

  Kernel build(const Problem& p, const Config& c) const override;
  std::vector<ArgSpec> arg_specs(const Problem& p) const override;
  std::vector<HostTensor> make_args(const Problem& p, uint64_t seed) const override;
  std::vector<int> outputs(const Problem& p) const override;
  /// Q, K, V and O may be strided views (the [B, S, H, D] projections viewed as [B, H, S, D]
  /// that PyTorch models pass, and an output in that layout); LSE and lens are contiguous.
  bool strided_arg(const Problem&, size_t i) const override { return i < 4; }
  double flops(const Problem& p) const override;
  double min_bytes(const Problem& p) const override;
  std::string unsupported_on(const Problem& p, const std::string& arch) const override;

  std::vector<double> reference(const Problem& p, const std::vector<HostTensor>& args,
                                const Box& box) const override;
  int64_t reduction_length(const Problem& p) const override { return p.at("D"); }
  bool gpu_reference(const Problem& p, const std::vector<DeviceTensor>& args,
                     const std::vector<DeviceTensor>& out_f32, Stream s) const override;

  std::string framework_name() const override {
    return "cuDNN fused attention (else the unfused reference)";
  }
  std::unique_ptr<Framework> framework(const Problem& p, const FrameworkOptions& o) const override;

  std::set<std::string> exact_keys() const override { return {"D", "causal", "lse", "group"}; }
  Problem tuning_problem(const Problem& p) const override;
  Estimate estimate(const Problem& p, const Config& c, const std::string& arch) const override;
  double score(const Problem& p, const Config& c, int sm_count) const override;

  static AttentionVariant variant(const Problem& p);
  /// Per-batch key lengths: from the lens option, or Skv for every batch.
  static std::vector<int64_t> key_lengths(const Problem& p);
};

} // namespace tp::ops
