// The glue kernels of the Llama model paths. Element loops over global tensors need no tiles:
// the CUDA backend spreads a `parallel` over the block's threads, the interpreter runs it in
// order. They copy elements without arithmetic, so no value is rounded.
#include "llama/LlamaKernels.h"

#include <string>

namespace tp::models {

namespace {

constexpr int kThreads = 128;

Kernel embedding(const LlamaConfig& c) {
  const int64_t Hd = c.hidden;
  Dim T("T"), Vd("V");
  Tensor ids("ids", {T}, i32), E("E", {Vd, Hd}, c.dtype), X("X", {T, Hd}, c.dtype);
  return kernel("llama_embedding_h" + std::to_string(Hd), {ids, E, X}, grid(T), threads(kThreads),
                [&](Var t) { parallel({Hd}, [&](Var d) { X(t, d) = E(ids(t), d); }); });
}

std::string heads_suffix(const LlamaConfig& c) {
  return "_h" + std::to_string(c.heads) + "_kv" + std::to_string(c.kv_heads) + "_d" +
         std::to_string(c.head_dim);
}

Kernel split_qk(const LlamaConfig& c) {
  const int64_t H = c.heads, Hkv = c.kv_heads, D = c.head_dim;
  Dim T("T");
  Tensor QKV("QKV", {T, c.qkv_dim()}, c.dtype);
  Tensor Q("Q", {T, H, D}, c.dtype), K("K", {T, Hkv, D}, c.dtype);
  return kernel("llama_split_qk" + heads_suffix(c), {QKV, Q, K}, grid(T), threads(kThreads),
                [&](Var t) {
                  parallel({H, D}, [&](Var h, Var d) { Q(t, h, d) = QKV(t, h * D + d); });
                  parallel({Hkv, D}, [&](Var h, Var d) { K(t, h, d) = QKV(t, (H + h) * D + d); });
                });
}

Kernel to_heads(const LlamaConfig& c) {
  const int64_t H = c.heads, Hkv = c.kv_heads, D = c.head_dim;
  Dim T("T"), Bd("B"), Sd("S");
  Tensor QR("QR", {T, H, D}, c.dtype), KR("KR", {T, Hkv, D}, c.dtype);
  Tensor QKV("QKV", {T, c.qkv_dim()}, c.dtype);
  Tensor Q("Q", {Bd, H, Sd, D}, c.dtype), K("K", {Bd, Hkv, Sd, D}, c.dtype);
  Tensor V("V", {Bd, Hkv, Sd, D}, c.dtype);
  return kernel("llama_to_heads" + heads_suffix(c), {QR, KR, QKV, Q, K, V}, grid(Sd, Bd),
                threads(kThreads), [&](Var s, Var b) {
                  Expr t = b * Sd + s;
                  parallel({H, D}, [&](Var h, Var d) { Q(b, h, s, d) = QR(t, h, d); });
                  parallel({Hkv, D}, [&](Var h, Var d) {
                    K(b, h, s, d) = KR(t, h, d);
                    V(b, h, s, d) = QKV(t, (H + Hkv + h) * D + d);
                  });
                });
}

Kernel cache_append(const LlamaConfig& c) {
  const int64_t H = c.heads, Hkv = c.kv_heads, D = c.head_dim;
  Dim Bd("B"), Ld("L");
  Tensor KR("KR", {Bd, Hkv, D}, c.dtype), QKV("QKV", {Bd, c.qkv_dim()}, c.dtype);
  Tensor POS("POS", {Bd}, i32);
  Tensor KC("KC", {Bd, Hkv, Ld, D}, c.dtype), VC("VC", {Bd, Hkv, Ld, D}, c.dtype);
  return kernel("llama_cache_append" + heads_suffix(c), {KR, QKV, POS, KC, VC}, grid(Bd),
                threads(kThreads), [&](Var b) {
                  parallel({Hkv, D}, [&](Var h, Var d) {
                    KC(b, h, POS(b), d) = KR(b, h, d);
                    VC(b, h, POS(b), d) = QKV(b, (H + Hkv + h) * D + d);
                  });
                });
}

Kernel cache_append_paged(const LlamaConfig& c) {
  const int64_t H = c.heads, Hkv = c.kv_heads, D = c.head_dim, block = c.paged_kv;
  Dim Bd("B"), MB("max_blocks"), NP("num_blocks");
  Tensor KR("KR", {Bd, Hkv, D}, c.dtype), QKV("QKV", {Bd, c.qkv_dim()}, c.dtype);
  Tensor POS("POS", {Bd}, i32), TABLE("TABLE", {Bd, MB}, i32);
  Tensor KP("KP", {NP, Hkv, block, D}, c.dtype), VP("VP", {NP, Hkv, block, D}, c.dtype);
  return kernel("llama_cache_append_paged" + std::to_string(block) + heads_suffix(c),
                {KR, QKV, POS, TABLE, KP, VP}, grid(Bd), threads(kThreads), [&](Var b) {
                  Var page = let("page", TABLE(b, POS(b) / block));
                  Var slot = let("slot", POS(b) % block);
                  parallel({Hkv, D}, [&](Var h, Var d) {
                    KP(page, h, slot, d) = KR(b, h, d);
                    VP(page, h, slot, d) = QKV(b, (H + Hkv + h) * D + d);
                  });
                });
}

Kernel merge_heads(const LlamaConfig& c) {
  const int64_t H = c.heads, D = c.head_dim;
  Dim T("T"), Bd("B"), Sd("S");
  Tensor O("O", {Bd, H, Sd, D}, c.dtype), A("A", {T, H * D}, c.dtype);
  return kernel("llama_merge_heads_h" + std::to_string(H) + "_d" + std::to_string(D), {O, A},
                grid(Sd, Bd), threads(kThreads), [&](Var s, Var b) {
                  parallel({H, D}, [&](Var h, Var d) { A(b * Sd + s, h * D + d) = O(b, h, s, d); });
                });
}

Kernel gather_last(const LlamaConfig& c) {
  const int64_t Hd = c.hidden;
  Dim T("T"), Bd("B");
  Tensor X("X", {T, Hd}, c.dtype), L("L", {Bd, Hd}, c.dtype);
  return kernel(
      "llama_gather_last_h" + std::to_string(Hd), {X, L}, grid(Bd), threads(kThreads),
      [&](Var b) { parallel({Hd}, [&](Var d) { L(b, d) = X((b + 1) * (T / Bd) - 1, d); }); });
}

} // namespace

LlamaKernels::LlamaKernels(const LlamaConfig& c)
    : embedding(models::embedding(c)), split_qk(models::split_qk(c)), to_heads(models::to_heads(c)),
      merge_heads(models::merge_heads(c)), gather_last(models::gather_last(c)),
      cache_append(models::cache_append(c)) {
  if (c.paged()) cache_append_paged = models::cache_append_paged(c);
}

} // namespace tp::models
