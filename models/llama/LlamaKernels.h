// The model's element-wise kernels, written in the tile language: the same kernel runs on the
// CPU interpreter and, through the CUDA backend, on the GPU. Each block works on one token row
// (or one (position, batch) pair) with 128 threads; sizes of the model are compile-time
// constants, the token count and batch are Dims bound at launch.
#pragma once
#include "llama/LlamaConfig.h"
#include "tilepilot/lang.h"

namespace tp::models {

struct LlamaKernels {
  /// ids i32 [T], E [vocab, hidden], X [T, hidden]: X[t] = E[ids[t]].
  Kernel embedding;
  /// X [T, hidden], W [hidden], Y [T, hidden]: Y = X / rms(X) * W, sums in f32.
  Kernel rmsnorm;
  /// QKV [T, (H + 2 Hkv) D] (t = b S + s), COS, SIN f32 [S, D/2] -> Q [B, H, S, D],
  /// K, V [B, Hkv, S, D]: heads split out, rotary embedding (rotate-half form) on Q and K.
  Kernel rope_split;
  /// O [B, H, S, D] -> A [T, H D]: heads merged back into token rows.
  Kernel merge_heads;
  /// X [T, hidden] += Y [T, hidden].
  Kernel residual_add;
  /// GU [T, 2 ffn] (gate, then up) -> Hh [T, ffn] = silu(gate) * up.
  Kernel swiglu;
  /// X [T, hidden] -> L [B, hidden]: the last token of each sequence (T = B S).
  Kernel gather_last;

  explicit LlamaKernels(const LlamaConfig& c);
};

} // namespace tp::models
