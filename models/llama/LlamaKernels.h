// The model's glue kernels, written in the tile language: the same kernel runs on the CPU
// interpreter and, through the CUDA backend, on the GPU. They only move data between the
// layouts of the operators (RMSNorm, RoPE, SwiGLU, attention and the GEMMs go through the
// dispatcher). Each block works on one token row (or one (position, batch) pair) with 128
// threads; sizes of the model are compile-time constants, token count and batch are Dims bound
// at launch.
#pragma once
#include "llama/LlamaConfig.h"
#include "tilepilot/lang.h"

namespace tp::models {

struct LlamaKernels {
  /// ids i32 [T], E [vocab, hidden], X [T, hidden]: X[t] = E[ids[t]].
  Kernel embedding;
  /// QKV [T, (H + 2 Hkv) D] -> Q [T, H, D], K [T, Hkv, D]: the rope operator's layout.
  Kernel split_qk;
  /// Prefill: QR [T, H, D], KR [T, Hkv, D] (rotated), QKV -> Q [B, H, S, D], K, V [B, Hkv, S, D]
  /// (t = b S + s): the attention operator's layout; V comes straight from QKV.
  Kernel to_heads;
  /// Prefill: O [B, H, S, D] -> A [T, H D]: heads merged back into token rows.
  Kernel merge_heads;
  /// Prefill: X [T, hidden] -> L [B, hidden]: the last token of each sequence (T = B S).
  Kernel gather_last;
  /// Decode: KR [B, Hkv, D] (rotated), QKV [B, (H + 2 Hkv) D], POS i32 [B] -> KC, VC
  /// [B, Hkv, L, D]: the new token's key and value written at entry POS[b] of each cache.
  Kernel cache_append;
  /// Paged decode (built only when c.paged()): KR, QKV, POS as above, TABLE i32 [B, MB] -> KP,
  /// VP [pages, Hkv, block, D]: the new key and value written at slot POS[b] % block of page
  /// TABLE[b, POS[b] / block].
  Kernel cache_append_paged;

  explicit LlamaKernels(const LlamaConfig& c);
};

} // namespace tp::models
