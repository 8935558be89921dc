// Lesson 13: attention forward, O = softmax(Q K^T / sqrt(D)) V, with online softmax (flash
// attention). Q, O [B, H, S, D]; K, V [B, Hkv, Skv, D], each key/value head shared by H / Hkv
// query heads (grouped-query attention); bf16 with f32 accumulators. A block owns bm query rows
// of one head and walks the keys bn at a time: scores by a tensor-core gemm, a running row max
// m and row sum l in fragments, the partial output rescaled by exp(m_old - m_new) whenever the
// max grows, and one divide by l at the end. Scores never reach memory.
// Teaches: two gemms in a loop, online softmax, masking the last key block only, exp2 domain.
// The library's kernel (src/ops/AttentionOp.cpp) adds causal masks, per-batch lengths, LSE.
// Run: build/example_13_attention         CPU interpreter, B=1 H=4 Hkv=2 S=77 Skv=100 D=64
//      build/example_13_attention --gpu   H200: B=4 H=32 Hkv=8 S=Skv=4096 D=128, TFLOP/s
//      build/example_13_attention --compile  no GPU: NVRTC for sm_90a, ptxas resources
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <tilepilot/tilepilot.h>

#include "lesson.h"

using namespace tp;

namespace {

constexpr double kLog2e = 1.4426950408889634;

struct AttnConfig {
  int64_t bm, bn;
  int stages, threads;
};

Kernel attention(int64_t D, const AttnConfig& c) {
  const int64_t bm = c.bm, bn = c.bn;
  Dim Bd("B"), H("H"), Hkv("Hkv"), S("S"), Skv("Skv");
  Tensor Q("Q", {Bd, H, S, D}, bf16), K("K", {Bd, Hkv, Skv, D}, bf16);
  Tensor V("V", {Bd, Hkv, Skv, D}, bf16), O("O", {Bd, H, S, D}, bf16);
  const double qk = kLog2e / std::sqrt(double(D)); // exp(x / sqrt(D)) = exp2(x qk)
  auto body = [&](Var bx, Var h, Var b) {
    Tile Qs = alloc_shared({bm, D}, bf16), Ks = alloc_shared({bn, D}, bf16);
    Tile Vs = alloc_shared({bn, D}, bf16);
    Tile s = alloc_fragment({bm, bn}, f32), p = alloc_fragment({bm, bn}, bf16);
    Tile o = alloc_fragment({bm, D}, f32);
    Tile m = alloc_fragment({bm}, f32), m_prev = alloc_fragment({bm}, f32);
    Tile l = alloc_fragment({bm}, f32), corr = alloc_fragment({bm}, f32);
    Tile row_sum = alloc_fragment({bm}, f32);
    Expr hk = h / (H / Hkv);
    copy(Q.tile(b, h, bx * bm, 0), Qs);
    clear(o);
    clear(l);
    fill(m, -infinity());
    pipelined(ceildiv(Skv, bn), c.stages, [&](Var kb) {
      copy(K.tile(b, hk, kb * bn, 0), Ks);
      copy(V.tile(b, hk, kb * bn, 0), Vs);
      gemm(Qs, Ks, s, {.trans_b = true, .clear = true});
      // Keys past Skv (their rows read as zeros) must not count: only the last block has any.
      if_then(kb * bn + bn > Skv, [&] {
        parallel({bm, bn},
                 [&](Var i, Var j) { s(i, j) = select(kb * bn + j < Skv, s(i, j), -infinity()); });
      });
      copy(m, m_prev);
      reduce_max(s, m, 1, /*clear=*/false);
      // Every block has a valid key, so m is finite from the first block on; m_prev = -inf
      // then gives corr = 0, which clears nothing that is not already zero.
      parallel({bm}, [&](Var i) { corr(i) = exp2((m_prev(i) - m(i)) * qk); });
      parallel({bm, bn}, [&](Var i, Var j) { s(i, j) = exp2(s(i, j) * qk - m(i) * qk); });
      reduce_sum(s, row_sum, 1);
      parallel({bm}, [&](Var i) { l(i) = l(i) * corr(i) + row_sum(i); });
      parallel({bm, D}, [&](Var i, Var d) { o(i, d) = o(i, d) * corr(i); });
      copy(s, p); // probabilities in bf16 for the tensor cores
      gemm(p, Vs, o);
    });
    parallel({bm, D}, [&](Var i, Var d) { o(i, d) = o(i, d) / l(i); });
    copy(o, O.tile(b, h, bx * bm, 0));
  };
  return kernel("attention_d" + std::to_string(D), {Q, K, V, O}, grid(ceildiv(S, bm), H, Bd),
                threads(c.threads), body);
}

struct Shape {
  int64_t B, H, Hkv, S, Skv, D;
};

// O[b, h, i, :] in fp64 for the given (b, h, i) rows, as flat (index, value) pairs of O.
std::vector<std::pair<int64_t, double>> reference(const Shape& z, const HostTensor& q,
                                                  const HostTensor& k, const HostTensor& v,
                                                  const std::vector<int64_t>& rows) {
  std::vector<std::pair<int64_t, double>> want;
  std::vector<double> w(z.Skv);
  for (int64_t r : rows) { // r = (b H + h) S + i
    int64_t b = r / (z.H * z.S), h = r / z.S % z.H, hk = h / (z.H / z.Hkv);
    int64_t kv0 = (b * z.Hkv + hk) * z.Skv * z.D;
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < z.Skv; ++j) {
      double d = 0;
      for (int64_t e = 0; e < z.D; ++e)
        d += q.get(r * z.D + e) * k.get(kv0 + j * z.D + e);
      w[j] = d / std::sqrt(double(z.D));
      mx = std::max(mx, w[j]);
    }
    for (int64_t j = 0; j < z.Skv; ++j)
      sum += (w[j] = std::exp(w[j] - mx));
    for (int64_t e = 0; e < z.D; ++e) {
      double o = 0;
      for (int64_t j = 0; j < z.Skv; ++j)
        o += w[j] * v.get(kv0 + j * z.D + e);
      want.emplace_back(r * z.D + e, o / sum);
    }
  }
  return want;
}

// O rounds to bf16 (2^-8 relative), and so do the probabilities fed to P V: their errors
// average out over the keys, leaving ~2^-9 of O's scale (|O| < 1 here).
constexpr double kAtol = 4e-3, kRtol = 1.0 / 64;

bool run(const Shape& z, const AttnConfig& c, bool gpu) {
  HostTensor q(bf16, {z.B, z.H, z.S, z.D}), k(bf16, {z.B, z.Hkv, z.Skv, z.D});
  HostTensor v(bf16, {z.B, z.Hkv, z.Skv, z.D}), o(bf16, {z.B, z.H, z.S, z.D});
  q.fill_random(1);
  k.fill_random(2);
  v.fill_random(3);
  Kernel kern = attention(z.D, c);
  if (!gpu) {
    o.poison();
    interpret(kern, {q, k, v, o});
    std::vector<int64_t> rows = lesson::all(z.B * z.H * z.S);
    return lesson::check("CPU B=1 H=4 Hkv=2 S=77 Skv=100 D=64", o, reference(z, q, k, v, rows),
                         kAtol, kRtol);
  }
  CompiledKernel ck = compile(kern);
  DeviceArray dq = DeviceArray::from(q), dk = DeviceArray::from(k), dv = DeviceArray::from(v);
  DeviceArray dout(bf16, {z.B, z.H, z.S, z.D});
  dout.fill_bytes(0xff);
  std::vector<Arg> args = {dq, dk, dv, dout};
  ck.launch(args);
  synchronize();
  std::vector<int64_t> rows = lesson::sample(z.B * z.H * z.S, 32);
  bool ok = lesson::check("GPU (32 sampled rows)", dout.to_host(), reference(z, q, k, v, rows),
                          kAtol, kRtol);
  // Two gemms of S x Skv x D per (batch, head).
  lesson::report_flops(time(ck, args, {.runs = 20, .flush_l2 = true}),
                       4.0 * z.B * z.H * z.S * z.Skv * z.D);
  return ok;
}

bool run_cpu() {
  return run({1, 4, 2, 77, 100, 64}, {32, 32, 1, 128}, false);
}
const Shape kGpuShape{4, 32, 8, 4096, 4096, 128};
const AttnConfig kGpuConfig{128, 128, 2, 256};

bool run_gpu() {
  return run(kGpuShape, kGpuConfig, true);
}
// The kernels --gpu runs, in their GPU config.
std::vector<Kernel> gpu_kernels() {
  return {attention(kGpuShape.D, kGpuConfig)};
}

} // namespace

int main(int argc, char** argv) {
  return lesson::main(argc, argv, run_cpu, run_gpu, gpu_kernels);
}
