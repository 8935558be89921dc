// The element-wise kernels of the Llama prefill. Element loops over global tensors need no
// tiles: the CUDA backend spreads a `parallel` over the block's threads, the interpreter runs
// it in order. Arithmetic is in f32; each store rounds once into the activation dtype.
#include "llama/LlamaKernels.h"

#include <string>

namespace tp::models {

namespace {

constexpr int kThreads = 128;

/// The widest chunk of a row one pass of the block covers: a divisor of `n` up to 128.
int64_t chunk(int64_t n) {
  for (int64_t c : {128, 64, 32, 16})
    if (n % c == 0) return c;
  return 1;
}

Kernel embedding(const LlamaConfig& c) {
  const int64_t Hd = c.hidden;
  Dim T("T"), Vd("V");
  Tensor ids("ids", {T}, i32), E("E", {Vd, Hd}, c.dtype), X("X", {T, Hd}, c.dtype);
  return kernel("llama_embedding_h" + std::to_string(Hd), {ids, E, X}, grid(T), threads(kThreads),
                [&](Var t) { parallel({Hd}, [&](Var d) { X(t, d) = E(ids(t), d); }); });
}

Kernel rmsnorm(const LlamaConfig& c) {
  const int64_t Hd = c.hidden, C = chunk(Hd);
  const double inv_n = 1.0 / static_cast<double>(Hd), eps = c.rms_eps;
  Dim T("T");
  Tensor X("X", {T, Hd}, c.dtype), W("W", {Hd}, c.dtype), Y("Y", {T, Hd}, c.dtype);
  return kernel(
      "llama_rmsnorm_h" + std::to_string(Hd), {X, W, Y}, grid(T), threads(kThreads), [&](Var t) {
        // Each thread keeps its own partial sum of squares over the row's chunks (the same thread
        // owns element j of every chunk), then one reduction folds the C partials.
        Tile part = alloc_shared({1, C}, f32);
        Tile ss = alloc_shared({1}, f32);
        parallel({1, C}, [&](Var i, Var j) { part(i, j) = 0.0; });
        serial(Hd / C, [&](Var k) {
          parallel({1, C}, [&](Var i, Var j) {
            Expr x = cast(f32, X(t, k * C + j));
            part(i, j) = part(i, j) + x * x;
          });
        });
        reduce_sum(part, ss, 1);
        serial(Hd / C, [&](Var k) {
          parallel({C}, [&](Var j) {
            Expr col = k * C + j;
            Y(t, col) = cast(f32, X(t, col)) * rsqrt(ss(0) * inv_n + eps) * cast(f32, W(col));
          });
        });
      });
}

Kernel rope_split(const LlamaConfig& c) {
  const int64_t H = c.heads, Hkv = c.kv_heads, D = c.head_dim, half = D / 2;
  Dim T("T"), Bd("B"), Sd("S");
  Tensor QKV("QKV", {T, c.qkv_dim()}, c.dtype);
  Tensor COS("COS", {Sd, half}, f32), SIN("SIN", {Sd, half}, f32);
  Tensor Q("Q", {Bd, H, Sd, D}, c.dtype), K("K", {Bd, Hkv, Sd, D}, c.dtype);
  Tensor V("V", {Bd, Hkv, Sd, D}, c.dtype);
  return kernel("llama_rope_split_h" + std::to_string(H) + "_kv" + std::to_string(Hkv) + "_d" +
                    std::to_string(D),
                {QKV, COS, SIN, Q, K, V}, grid(Sd, Bd), threads(kThreads), [&](Var s, Var b) {
                  Expr t = b * Sd + s;
                  // Rotate-half RoPE: (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin) with x1 the
                  // first half of the head and x2 the second, angle s * theta^(-2d/D) (tabulated on
                  // the host).
                  auto rotate = [&](const Tensor& out, int64_t heads, int64_t col0) {
                    parallel({heads, half}, [&](Var h, Var d) {
                      Expr col = col0 + h * D + d;
                      Expr x1 = cast(f32, QKV(t, col)), x2 = cast(f32, QKV(t, col + half));
                      Expr cs = COS(s, d), sn = SIN(s, d);
                      out(b, h, s, d) = x1 * cs - x2 * sn;
                      out(b, h, s, d + half) = x2 * cs + x1 * sn;
                    });
                  };
                  rotate(Q, H, 0);
                  rotate(K, Hkv, H * D);
                  parallel({Hkv, D}, [&](Var h, Var d) {
                    V(b, h, s, d) = QKV(t, (H + Hkv) * D + h * D + d);
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

Kernel residual_add(const LlamaConfig& c) {
  const int64_t Hd = c.hidden;
  Dim T("T");
  Tensor X("X", {T, Hd}, c.dtype), Y("Y", {T, Hd}, c.dtype);
  return kernel("llama_residual_add_h" + std::to_string(Hd), {X, Y}, grid(T), threads(kThreads),
                [&](Var t) {
                  parallel({Hd}, [&](Var d) { X(t, d) = cast(f32, X(t, d)) + cast(f32, Y(t, d)); });
                });
}

Kernel swiglu(const LlamaConfig& c) {
  const int64_t F = c.ffn;
  Dim T("T");
  Tensor GU("GU", {T, 2 * F}, c.dtype), Hh("Hh", {T, F}, c.dtype);
  return kernel("llama_swiglu_f" + std::to_string(F), {GU, Hh}, grid(T), threads(kThreads),
                [&](Var t) {
                  parallel({F}, [&](Var f) {
                    Expr g = cast(f32, GU(t, f)), u = cast(f32, GU(t, F + f));
                    Hh(t, f) = g / (1.0 + exp(-g)) * u; // silu(gate) * up
                  });
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
    : embedding(models::embedding(c)), rmsnorm(models::rmsnorm(c)),
      rope_split(models::rope_split(c)), merge_heads(models::merge_heads(c)),
      residual_add(models::residual_add(c)), swiglu(models::swiglu(c)),
      gather_last(models::gather_last(c)) {}

} // namespace tp::models
