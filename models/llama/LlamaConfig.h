// The shape of a Llama-style decoder prefill: sizes, layer count, batch and sequence length.
// Defaults are Llama-3-8B's (hidden 4096, 32 query / 8 key-value heads of 128, MLP 14336, vocab
// 128256, RoPE theta 500000) with 2 layers; tiny() is a model small enough for the interpreter.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "tilepilot/dtype.h"

namespace tp::models {

struct LlamaConfig {
  int64_t layers = 2, batch = 1, seq = 2048;
  int64_t hidden = 4096, heads = 32, kv_heads = 8, head_dim = 128, ffn = 14336, vocab = 128256;
  double rms_eps = 1e-5, rope_theta = 500000.0;
  bool all_logits = false; // LM head over every token; default: the last token of each sequence
  uint64_t seed = 0;       // weights and token ids
  DType dtype = DType::bf16;

  static LlamaConfig llama3_8b() { return {}; }
  /// hidden 64, 4 heads / 2 kv heads of 16, MLP 128, vocab 256, 2 layers, batch 2, seq 16.
  static LlamaConfig tiny();

  int64_t tokens() const { return batch * seq; }
  int64_t q_dim() const { return heads * head_dim; }
  int64_t qkv_dim() const { return (heads + 2 * kv_heads) * head_dim; }
  int64_t logit_rows() const { return all_logits ? tokens() : batch; }
  /// User error naming the first size the kernels cannot run.
  void validate() const;
  /// "llama-prefill 2 layers, batch 1 x seq 2048, hidden 4096, heads 32/8x128, ffn 14336, ..."
  std::string str() const;
};

/// Applies `key=value` settings to `base` (preset first when given): preset=llama3-8b|tiny,
/// layers, batch, seq, tokens (= batch x seq; sets seq), hidden, heads, kv_heads, head_dim,
/// ffn (or mlp), vocab, eps, rope_theta, logits=last|all, seed. User error naming an unknown
/// key or a bad value. head_dim defaults to hidden / heads when hidden or heads change.
LlamaConfig parse_llama_config(const std::map<std::string, std::string>& kv,
                               LlamaConfig base = LlamaConfig::llama3_8b());

} // namespace tp::models
