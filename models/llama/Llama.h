// A Llama-style decoder prefill over an Exec: embedding, N x [RMSNorm, fused QKV projection,
// rotary embedding, causal grouped-query attention, output projection, residual, RMSNorm,
// fused gate/up projection, SwiGLU, down projection, residual], final RMSNorm, LM head.
// Weights are deterministic random values (nothing is downloaded), scaled so activations keep
// unit size: projections U(-a, a) with a = sqrt(3 / fan_in), norm weights 1 +- 0.1.
// Projection weights are stored [out, in] as in PyTorch's Linear, so every GEMM is layout nt
// (the shapes the gemm pilot tests); the LM head computes the last token's logits by default.
#pragma once
#include <functional>
#include <vector>

#include "llama/Exec.h"
#include "llama/LlamaConfig.h"
#include "llama/LlamaKernels.h"
#include "tilepilot/problem.h"

namespace tp::models {

/// The GEMM problems of one forward (labels gemm.qkv, gemm.o, gemm.gate_up, gemm.down,
/// gemm.lm_head) and the attention problem, as the dispatcher sees them.
std::vector<std::pair<std::string, ops::Problem>> llama_problems(const LlamaConfig& c);

class LlamaModel {
public:
  /// Allocates and initializes weights, rotary tables, token ids and activations on `ex`.
  LlamaModel(const LlamaConfig& c, Exec& ex);

  /// One prefill; returns the logits [logit_rows, vocab] (owned by the model, overwritten by
  /// the next forward). Each operator is bracketed by Exec::op_begin/op_end.
  const Buf& forward();

  const LlamaConfig& config() const { return c_; }
  std::vector<std::pair<std::string, ops::Problem>> problems() const;
  size_t weight_bytes() const { return weight_bytes_; }
  size_t activation_bytes() const { return activation_bytes_; }

private:
  struct Layer {
    Buf attn_norm, wqkv, wo, mlp_norm, w_gate_up, w_down;
  };
  Buf weight(std::vector<int64_t> shape, double center, double half_width);
  Buf act(DType t, std::vector<int64_t> shape);
  void op(const std::string& label, const std::function<void()>& body);

  LlamaConfig c_;
  Exec& ex_;
  LlamaKernels k_;
  uint64_t next_seed_ = 0;
  size_t weight_bytes_ = 0, activation_bytes_ = 0;
  Buf ids_, cos_, sin_, embed_, final_norm_, lm_head_;
  std::vector<Layer> layers_;
  Buf x_, xn_, qkv_, q_, k_act_, v_, o_, attn_, y_, gu_, h_, last_, last_n_, logits_;
};

} // namespace tp::models
