// Lesson 14: flash decoding, attention for one new query token per sequence against a long KV
// cache, in two kernels. One query row per head leaves lesson 13's grid far too small to fill
// a GPU (B H blocks), so the keys are split as well: `split` gives each (batch, KV head,
// split) block a slice of the cache, the G = H / Hkv query heads sharing that KV head as the
// rows of its Q tile, and writes an unnormalised partial output and its log-sum-exp; `combine`
// then merges the splits of each head: O = sum_s exp(lse_s - lse) O_s, lse = log sum exp lse_s.
// Q, O [B, Hkv, G, D] (the same memory as [B, H, D]); K, V [B, Hkv, S, D]; bf16, f32 partials.
// Teaches: two kernels and an intermediate, log-sum-exp merging, padding rows of a gemm tile.
// Run: build/example_14_flash_decoding         CPU interpreter, B=2 H=8 Hkv=2 S=333 D=64
//      build/example_14_flash_decoding --gpu   H200: B=8 H=32 Hkv=8 S=8192 D=128, TB/s
//      build/example_14_flash_decoding --compile  no GPU: NVRTC for sm_90a, ptxas resources
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include <tilepilot/tilepilot.h>

#include "lesson.h"

using namespace tp;

namespace {

constexpr double kLog2e = 1.4426950408889634;

struct DecodeConfig {
  int64_t D, G, splits;
  int64_t gm; // rows of the Q tile: G padded up to what the target's gemm takes (64 on sm_90a)
  int64_t bn; // keys per step
  int threads;
};

Kernel split(const DecodeConfig& c) {
  const int64_t D = c.D, gm = c.gm, bn = c.bn;
  Dim Bd("B"), Hkv("Hkv"), S("S"), BH("BH");
  Tensor Q("Q", {Bd, Hkv, c.G, D}, bf16), K("K", {Bd, Hkv, S, D}, bf16);
  Tensor V("V", {Bd, Hkv, S, D}, bf16);
  Tensor Op("O_part", {BH, c.splits, c.G, D}, f32), Lp("lse_part", {BH, c.splits, c.G}, f32);
  const double scale = 1.0 / std::sqrt(double(D)), qk = scale * kLog2e;
  auto body = [&](Var z, Var hk, Var b) {
    Tile Qs = alloc_shared({gm, D}, bf16), Ks = alloc_shared({bn, D}, bf16);
    Tile Vs = alloc_shared({bn, D}, bf16);
    Tile s = alloc_fragment({gm, bn}, f32), p = alloc_fragment({gm, bn}, bf16);
    Tile o = alloc_fragment({gm, D}, f32);
    Tile m = alloc_fragment({gm}, f32), m_prev = alloc_fragment({gm}, f32);
    Tile l = alloc_fragment({gm}, f32), corr = alloc_fragment({gm}, f32);
    Tile row_sum = alloc_fragment({gm}, f32);
    // Split z takes key blocks [kb0, kb0 + count); trailing splits of a short cache get none.
    Expr nb = ceildiv(S, bn), per = ceildiv(nb, c.splits);
    Expr kb0 = z * per, count = max(min(per, nb - kb0), 0);
    copy(Q.tile(b, hk, 0, 0), Qs); // rows G..gm-1 lie past Q's G: zeros, and never stored
    clear(o);
    clear(l);
    fill(m, -infinity());
    pipelined(count, 2, [&](Var kk) {
      Expr k0 = (kb0 + kk) * bn;
      copy(K.tile(b, hk, k0, 0), Ks);
      copy(V.tile(b, hk, k0, 0), Vs);
      gemm(Qs, Ks, s, {.trans_b = true, .clear = true});
      if_then(k0 + bn > S, [&] {
        parallel({gm, bn},
                 [&](Var i, Var j) { s(i, j) = select(k0 + j < S, s(i, j), -infinity()); });
      });
      copy(m, m_prev);
      reduce_max(s, m, 1, /*clear=*/false);
      parallel({gm}, [&](Var i) { corr(i) = exp2((m_prev(i) - m(i)) * qk); });
      parallel({gm, bn}, [&](Var i, Var j) { s(i, j) = exp2(s(i, j) * qk - m(i) * qk); });
      reduce_sum(s, row_sum, 1);
      parallel({gm}, [&](Var i) { l(i) = l(i) * corr(i) + row_sum(i); });
      parallel({gm, D}, [&](Var i, Var d) { o(i, d) = o(i, d) * corr(i); });
      copy(s, p);
      gemm(p, Vs, o);
    });
    // The partial is normalised by its own sum; an empty split has l = 0 and lse = -inf,
    // which gives it weight 0 in the combine.
    parallel({gm, D}, [&](Var i, Var d) { o(i, d) = select(l(i) > 0, o(i, d) / l(i), 0.0); });
    parallel({gm}, [&](Var i) {
      row_sum(i) = select(l(i) > 0, m(i) * scale + log(l(i)), -infinity()); // natural log
    });
    copy(o, Op.tile(b * Hkv + hk, z, 0, 0));
    copy(row_sum, Lp.tile(b * Hkv + hk, z, 0));
  };
  return kernel("decode_split", {Q, K, V, Op, Lp}, grid(c.splits, Hkv, Bd), threads(c.threads),
                body);
}

Kernel combine(const DecodeConfig& c) {
  const int64_t D = c.D, G = c.G, ns = c.splits;
  Dim Bd("B"), Hkv("Hkv"), BH("BH");
  Tensor Op("O_part", {BH, ns, G, D}, f32), Lp("lse_part", {BH, ns, G}, f32);
  Tensor O("O", {Bd, Hkv, G, D}, bf16);
  auto body = [&](Var hk, Var b) {
    Tile lse = alloc_fragment({ns, G}, f32), w = alloc_fragment({ns, G}, f32);
    Tile ws = alloc_shared({ns, G}, f32); // read across threads in the loop below
    Tile mx = alloc_fragment({G}, f32), total = alloc_fragment({G}, f32);
    Tile part = alloc_fragment({G, D}, f32), o = alloc_fragment({G, D}, f32);
    copy(Lp.tile(b * Hkv + hk, 0, 0), lse);
    reduce_max(lse, mx, 0); // split 0 is never empty, so mx is finite
    parallel({ns, G}, [&](Var s, Var g) { w(s, g) = exp(lse(s, g) - mx(g)); });
    reduce_sum(w, total, 0);
    copy(w, ws);
    clear(o);
    serial(ns, [&](Var s) {
      copy(Op.tile(b * Hkv + hk, s, 0, 0), part);
      parallel({G, D}, [&](Var g, Var d) { o(g, d) = o(g, d) + ws(s, g) * part(g, d); });
    });
    parallel({G, D}, [&](Var g, Var d) { o(g, d) = o(g, d) / total(g); });
    copy(o, O.tile(b, hk, 0, 0));
  };
  return kernel("decode_combine", {Op, Lp, O}, grid(Hkv, Bd), threads(128), body);
}

struct Shape {
  int64_t B, H, Hkv, S;
};

// O in fp64 for the given (b, hk, g) rows, as flat (index, value) pairs of O.
std::vector<std::pair<int64_t, double>> reference(const Shape& z, int64_t D, const HostTensor& q,
                                                  const HostTensor& k, const HostTensor& v,
                                                  const std::vector<int64_t>& rows) {
  const int64_t G = z.H / z.Hkv;
  std::vector<std::pair<int64_t, double>> want;
  std::vector<double> w(z.S);
  for (int64_t r : rows) { // r = (b Hkv + hk) G + g
    int64_t kv0 = r / G * z.S * D;
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < z.S; ++j) {
      double d = 0;
      for (int64_t e = 0; e < D; ++e)
        d += q.get(r * D + e) * k.get(kv0 + j * D + e);
      w[j] = d / std::sqrt(double(D));
      mx = std::max(mx, w[j]);
    }
    for (int64_t j = 0; j < z.S; ++j)
      sum += (w[j] = std::exp(w[j] - mx));
    for (int64_t e = 0; e < D; ++e) {
      double o = 0;
      for (int64_t j = 0; j < z.S; ++j)
        o += w[j] * v.get(kv0 + j * D + e);
      want.emplace_back(r * D + e, o / sum);
    }
  }
  return want;
}

// As lesson 13: O and the probabilities round to bf16; the partials stay f32.
constexpr double kAtol = 4e-3, kRtol = 1.0 / 64;

bool run(const Shape& z, const DecodeConfig& c, bool gpu) {
  const int64_t G = c.G, D = c.D, BH = z.B * z.Hkv;
  HostTensor q(bf16, {z.B, z.Hkv, G, D}), k(bf16, {z.B, z.Hkv, z.S, D});
  HostTensor v(bf16, {z.B, z.Hkv, z.S, D}), o(bf16, {z.B, z.Hkv, G, D});
  HostTensor op(f32, {BH, c.splits, G, D}), lp(f32, {BH, c.splits, G});
  q.fill_random(1);
  k.fill_random(2);
  v.fill_random(3);
  Kernel ks = split(c), kc = combine(c);
  std::vector<int64_t> rows = lesson::all(BH * G);
  if (!gpu) {
    op.poison();
    lp.poison();
    o.poison();
    interpret(ks, {q, k, v, op, lp});
    interpret(kc, {op, lp, o});
    return lesson::check("CPU B=2 H=8 Hkv=2 S=333 D=64, 3 splits", o,
                         reference(z, D, q, k, v, rows), kAtol, kRtol);
  }
  CompiledKernel cs = compile(ks), cc = compile(kc);
  DeviceArray dq = DeviceArray::from(q), dk = DeviceArray::from(k), dv = DeviceArray::from(v);
  DeviceArray dop(f32, {BH, c.splits, G, D}), dlp(f32, {BH, c.splits, G});
  DeviceArray dout(bf16, {z.B, z.Hkv, G, D});
  dout.fill_bytes(0xff);
  std::vector<Arg> a1 = {dq, dk, dv, dop, dlp}, a2 = {dop, dlp, dout};
  cs.launch(a1);
  cc.launch(a2);
  synchronize();
  bool ok = lesson::check("GPU B=8 H=32 Hkv=8 S=8192 D=128", dout.to_host(),
                          reference(z, D, q, k, v, rows), kAtol, kRtol);
  TimeResult t = time(
      [&](Stream s) {
        cs.launch(a1, s);
        cc.launch(a2, s);
      },
      {.runs = 20, .flush_l2 = true});
  // The KV cache dominates: K and V read once; Q, O and the partials are under 1 %.
  lesson::report_bytes(t, 2.0 * z.B * z.Hkv * z.S * D * 2 + 2.0 * z.B * z.H * D * 2);
  return ok;
}

bool run_cpu() {
  return run({2, 8, 2, 333}, {64, 4, 3, 16, 32, 128}, false);
}
// One warpgroup of 128 threads takes a 64-row Q tile to wgmma (two would split its 64 rows and
// fall to mma.sync), and a block then fills an SM: 64 (b, hk) pairs x 2 splits = 128 blocks is
// one wave on the H200's 132 SMs. Measured there (2026-12-03): 256 threads x 16 splits 0.138 ms,
// 128 x 8 0.093 ms; decode_attention's kernel of the same shape 0.082 ms at 2 splits.
const DecodeConfig kGpuConfig{128, 4, 2, 64, 64, 128};

bool run_gpu() {
  return run({8, 32, 8, 8192}, kGpuConfig, true);
}
// The kernels --gpu runs, in their GPU config.
std::vector<Kernel> gpu_kernels() {
  return {split(kGpuConfig), combine(kGpuConfig)};
}

} // namespace

int main(int argc, char** argv) {
  return lesson::main(argc, argv, run_cpu, run_gpu, gpu_kernels);
}
