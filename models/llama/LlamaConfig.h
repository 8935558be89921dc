// The shape of a Llama-style decoder run: sizes, layer count, and either a prefill (batch x
// seq tokens) or one decode step (batch sequences, one new token each, over a KV cache of
// kv_len entries per sequence). Defaults are Llama-3-8B's (hidden 4096, 32 query / 8 key-value
// heads of 128, MLP 14336, vocab 128256, RoPE theta 500000) with 2 layers; tiny() and
// tiny_decode() are models small enough for the interpreter.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tilepilot/dtype.h"

namespace tp::models {

enum class LlamaMode { prefill, decode };

struct LlamaConfig {
  LlamaMode mode = LlamaMode::prefill;
  int64_t layers = 2, batch = 1, seq = 2048;
  /// Decode: cache entries before the step, per sequence (kv_lens when ragged, else kv_len).
  int64_t kv_len = 4096;
  std::vector<int64_t> kv_lens;
  /// Decode: the KV cache's page size in tokens (16, 32, 64, 128 or 256: decode_attention's
  /// page sizes), or 0 for one contiguous cache per sequence. Paged: each layer's K and V are a
  /// pool of pages [cache_pages, kv_heads, paged_kv, head_dim] and a block table maps each
  /// sequence's token j to page table[b][j / paged_kv] (see llama_block_table).
  int64_t paged_kv = 0;
  int64_t hidden = 4096, heads = 32, kv_heads = 8, head_dim = 128, ffn = 14336, vocab = 128256;
  double rms_eps = 1e-5, rope_theta = 500000.0;
  bool rope_llama3_scaling = false; // Llama-3.1's rope_scaling; Llama-3-8B has none
  bool all_logits = false;          // prefill: LM head over every token; default: the last of each
  uint64_t seed = 0;                // weights, token ids and the prefilled KV cache
  DType dtype = DType::bf16;

  static LlamaConfig llama3_8b() { return {}; }
  /// hidden 64, 4 heads / 2 kv heads of 16, MLP 128, vocab 256, 2 layers, batch 2, seq 16.
  static LlamaConfig tiny();
  /// Decode: hidden 128, 4 heads / 2 kv heads of 64 (decode_attention takes D 64 or 128),
  /// MLP 192, vocab 256, 2 layers, 3 sequences with ragged caches of 5, 40 and 17 entries.
  static LlamaConfig tiny_decode();

  bool decode() const { return mode == LlamaMode::decode; }
  /// Rows of the activations: batch x seq (prefill) or batch (decode: one token each).
  int64_t tokens() const { return decode() ? batch : batch * seq; }
  int64_t q_dim() const { return heads * head_dim; }
  int64_t qkv_dim() const { return (heads + 2 * kv_heads) * head_dim; }
  int64_t logit_rows() const { return all_logits && !decode() ? tokens() : batch; }
  /// Decode: sequence b's cache length before the step; the step writes entry kv_len_of(b).
  int64_t kv_len_of(int64_t b) const;
  /// Decode: cache entries per sequence and layer (the longest cache plus the new token).
  int64_t cache_capacity() const;
  bool paged() const { return decode() && paged_kv > 0; }
  /// Paged: block table columns, the pages of the longest sequence (ceil(capacity / paged_kv)).
  int64_t pages_per_seq() const;
  /// Paged: pages in each layer's pool, batch x pages_per_seq (decode_attention's table is
  /// rectangular, so the pool holds a full row for every sequence; see llama_block_table).
  int64_t cache_pages() const { return batch * pages_per_seq(); }
  /// User error naming the first setting the model cannot run.
  void validate() const;
  /// "llama-prefill 2 layers, batch 1 x seq 2048, ..." or "llama-decode 2 layers, batch 8,
  /// kv_len 4096, ..., contiguous KV" ("paged KV, 16-token pages" when paged).
  std::string str() const;
};

/// Applies `key=value` settings to `base` (preset first when given): preset=llama3-8b|tiny,
/// mode=prefill|decode, layers, batch, seq, tokens (= batch x seq; sets seq), kv_len (one
/// length, or batch lengths separated by ':'), paged_kv (decode: page size, 0 = contiguous),
/// hidden, heads, kv_heads, head_dim, ffn (or mlp), vocab, eps, rope_theta,
/// rope_scaling=none|llama3, logits=last|all, seed, dtype. The tiny preset in decode mode is
/// tiny_decode(). User error naming an unknown key or a bad value. head_dim defaults to
/// hidden / heads when hidden or heads change.
LlamaConfig parse_llama_config(const std::map<std::string, std::string>& kv,
                               LlamaConfig base = LlamaConfig::llama3_8b());

/// The mode of a model path: "llama-prefill" -> "prefill", "llama-decode" -> "decode"; a user
/// error naming the paths otherwise.
std::string mode_of_path(const std::string& path);

} // namespace tp::models
