// A Llama-style decoder over an Exec, in one of two modes.
//   prefill: embedding, N x [RMSNorm, fused QKV projection, RoPE, causal grouped-query
//     attention, output projection, residual + RMSNorm, fused gate/up projection, SwiGLU, down
//     projection], residual + final RMSNorm (of the last token by default), LM head.
//   decode: one new token for each of `batch` sequences over a KV cache per layer: the same
//     layers with RoPE at each sequence's position, the new key and value appended to the
//     cache, and decode_attention over it instead of attention.
// Every RMSNorm after the first adds the residual in the same operator call (rmsnorm with
// residual=1); the residual stream ping-pongs between two buffers, since the operator's
// outputs must not alias its inputs.
//
// Weights and the prefilled cache are deterministic random values (nothing is downloaded),
// scaled so activations keep unit size: projections U(-a, a) with a = sqrt(3 / fan_in), norm
// weights 1 +- 0.1, cache entries U(-1, 1). Projection weights are stored [out, in] as in
// PyTorch's Linear, so every GEMM is layout nt. A decode step writes the new token's key and
// value at entry kv_len of each cache and attends over kv_len + 1 entries; every forward() does
// the same step (it overwrites that entry), so repeated steps are identical work and values.
//
// With paged_kv > 0 each layer's K and V are a pool of pages [pages, kv_heads, paged_kv,
// head_dim] and decode_attention runs paged over a block table (llama_block_table). The pool
// holds the same prefilled values as the contiguous cache (entry j of sequence b sits in slot
// j % paged_kv of page table[b][j / paged_kv]), so both layouts give the same logits.
#pragma once
#include <functional>
#include <vector>

#include "llama/Exec.h"
#include "llama/LlamaConfig.h"
#include "llama/LlamaKernels.h"
#include "tilepilot/problem.h"

namespace tp::models {

/// The distinct operator problems of one forward, as the dispatcher sees them (labels
/// gemm.qkv, gemm.o, gemm.gate_up, gemm.down, gemm.lm_head, attention or decode_attention,
/// rmsnorm, rmsnorm.residual, rmsnorm.final, rope, swiglu).
std::vector<std::pair<std::string, ops::Problem>> llama_problems(const LlamaConfig& c);

/// Paged decode: the block table, row-major [batch, pages_per_seq]. Sequence b owns the pages
/// of its first ceil((kv_len_of(b) + 1) / paged_kv) entries; the pool's pages are handed out
/// in a fixed shuffled order from the model seed (as vLLM's allocator leaves them after churn),
/// so the table is deliberately not the identity. The entries past a sequence's own pages hold
/// the pool's free pages: every entry names a distinct real page.
std::vector<int64_t> llama_block_table(const LlamaConfig& c);

class LlamaModel {
public:
  /// Allocates and initializes weights, positions, token ids, caches and activations on `ex`.
  LlamaModel(const LlamaConfig& c, Exec& ex);

  /// One prefill or decode step; returns the logits [logit_rows, vocab] (owned by the model,
  /// overwritten by the next forward). Each operator is bracketed by Exec::op_begin/op_end.
  const Buf& forward();

  const LlamaConfig& config() const { return c_; }
  std::vector<std::pair<std::string, ops::Problem>> problems() const;
  size_t weight_bytes() const { return weight_bytes_; }
  size_t activation_bytes() const { return activation_bytes_; }
  size_t cache_bytes() const { return cache_bytes_; }

private:
  struct Layer {
    Buf attn_norm, wqkv, wo, mlp_norm, w_gate_up, w_down;
    // Decode: [batch, kv_heads, cache_capacity, head_dim], or paged: the pool of pages
    // [cache_pages, kv_heads, paged_kv, head_dim].
    Buf k_cache, v_cache;
  };
  Buf weight(std::vector<int64_t> shape, double center, double half_width);
  Buf act(DType t, std::vector<int64_t> shape);
  void op(const std::string& label, const std::function<void()>& body);
  void attention_block(const Layer& L);
  void upload_inputs();

  LlamaConfig c_;
  Exec& ex_;
  LlamaKernels k_;
  uint64_t next_seed_ = 0;
  size_t weight_bytes_ = 0, activation_bytes_ = 0, cache_bytes_ = 0;
  Buf ids_, pos_, lens_, table_, embed_, final_norm_, lm_head_;
  std::vector<Layer> layers_;
  // The residual stream and its ping-pong partner (see above), normed rows, projections.
  Buf x_, x2_, xn_, qkv_, q_tok_, k_tok_, q_rot_, k_rot_, attn_, y_, gu_, h_, logits_;
  Buf q_, k_act_, v_, o_;                 // prefill: attention's [B, heads, S, D] layout
  Buf last_x_, last_y_, last_s_, last_n_; // prefill, last-token logits
};

} // namespace tp::models
