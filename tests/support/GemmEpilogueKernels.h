// GEMM kernels with element-wise epilogues on the accumulator, as lesson 08 writes them, for the
// tests of issue 19's epilogue work: the layout decisions (tests/passes), the NVRTC compile
// against the plain GEMM (tests/codegen) and the interpreter-vs-CUDA check (GPU suite).
//   epilogue_gemm(c, e)   C = epilogue(A B) over bm x bn x bk tiles, the K loop pipelined; the
//                         epilogue is any of: + bias[N] (a 1-d fragment), GELU (tanh form
//                         through exp and a quotient), * alpha (a scalar parameter), + R[M, N]
//                         (a 2-d fragment copied from global memory).
//   epilogue_reference()  the same in fp64 from the rounded inputs.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "tilepilot/tensor.h"
#include "tilepilot/tilepilot.h"

namespace tp::test {

struct EpilogueTiles {
  int64_t bm = 128, bn = 256, bk = 64;
  int stages = 4, threads = 256;
};

struct Epilogue {
  bool bias = false, gelu = false, scale = false, residual = false;
};

inline constexpr double kGeluC = 0.7978845608028654; // sqrt(2 / pi)

/// gelu(v) = v/2 (1 + tanh(u)), u = sqrt(2/pi) (v + 0.044715 v^3), tanh(u) = 1 - 2/(e^{2u} + 1).
inline Expr gelu_expr(const Expr& v) {
  Expr u = kGeluC * (v + 0.044715 * v * v * v);
  return 0.5 * v * (1.0 + (1.0 - 2.0 / (exp(2.0 * u) + 1.0)));
}

/// Parameters in order: A [M, K], B [K, N], then bias [N], R [M, N], alpha as enabled, C [M, N].
inline Kernel epilogue_gemm(const EpilogueTiles& c, const Epilogue& e) {
  Dim M("M"), N("N"), K("K");
  Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16), bias("bias", {N}, bf16);
  Tensor R("R", {M, N}, bf16), C("C", {M, N}, bf16);
  Scalar alpha("alpha", f32);
  std::vector<Param> params = {A, B};
  if (e.bias) params.push_back(bias);
  if (e.residual) params.push_back(R);
  if (e.scale) params.push_back(alpha);
  params.push_back(C);
  auto body = [&](Var bx, Var by) {
    Tile As = alloc_shared({c.bm, c.bk}, bf16), Bs = alloc_shared({c.bk, c.bn}, bf16);
    Tile acc = alloc_fragment({c.bm, c.bn}, f32);
    clear(acc);
    pipelined(ceildiv(K, c.bk), c.stages, [&](Var k) {
      copy(A.tile(by * c.bm, k * c.bk), As);
      copy(B.tile(k * c.bk, bx * c.bn), Bs);
      gemm(As, Bs, acc);
    });
    // Allocated after the loop, in this order: acc is fragment 0, then b, then r.
    std::optional<Tile> b, r;
    if (e.bias) b = alloc_fragment({c.bn}, f32), copy(bias.tile(bx * c.bn), *b);
    if (e.residual) r = alloc_fragment({c.bm, c.bn}, f32), copy(R.tile(by * c.bm, bx * c.bn), *r);
    parallel({c.bm, c.bn}, [&](Var i, Var j) {
      Expr v = acc(i, j);
      if (e.bias) v = v + (*b)(j);
      if (e.gelu) v = gelu_expr(v);
      if (e.scale) v = v * alpha;
      if (e.residual) v = v + (*r)(i, j);
      acc(i, j) = v;
    });
    copy(acc, C.tile(by * c.bm, bx * c.bn));
  };
  return kernel("gemm_epilogue", params, grid(ceildiv(N, c.bn), ceildiv(M, c.bm)),
                threads(c.threads), body);
}

/// C[m, n] in fp64 at the given flat indices; bias and r may be null when not enabled.
inline std::vector<double> epilogue_reference(const Epilogue& e, const HostTensor& a,
                                              const HostTensor& b, const HostTensor* bias,
                                              const HostTensor* r, double alpha,
                                              const std::vector<int64_t>& at) {
  const int64_t K = a.shape()[1], N = b.shape()[1];
  std::vector<double> out;
  for (int64_t i : at) {
    int64_t m = i / N, n = i % N;
    double v = 0;
    for (int64_t k = 0; k < K; ++k)
      v += a.get(m * K + k) * b.get(k * N + n);
    if (e.bias) v += bias->get(n);
    if (e.gelu) v = 0.5 * v * (1 + std::tanh(kGeluC * (v + 0.044715 * v * v * v)));
    if (e.scale) v *= alpha;
    if (e.residual) v += r->get(i);
    out.push_back(v);
  }
  return out;
}

} // namespace tp::test
