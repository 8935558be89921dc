// Lesson 11: a GEMM with int4 weights dequantized on the fly, C = A dequant(W). A [M, K] and C
// [M, N] are bf16. W holds K x N 4-bit codes, 8 per i32 word along K (word [r, n] holds rows
// 8r..8r+7 of column n, row 8r+i in bits 4i..4i+3), with one bf16 scale per column and group
// of `group` rows: w[k, n] = (code - 8) * scale[k / group, n]. Each K step copies A, the packed
// words and the scale row into shared tiles (the pipeline fetches all three stages ahead),
// unpacks the words into the shared B tile, then runs the tensor-core gemm on bf16 as in
// lesson 7: the weights move at a quarter of bf16's bytes.
// Teaches: bit operations and bitcast on tiles, writing a shared tile in a parallel loop from
// staged copies, a C++ loop that unrolls at build time. K must be a multiple of `group`,
// `group` of the K step.
// Run: build/example_11_int4_gemm         CPU interpreter, 77 x 45 x 160, groups of 32
//      build/example_11_int4_gemm --gpu   H200: 4096^3, groups of 128, sampled check, TFLOP/s
//      build/example_11_int4_gemm --compile  no GPU: NVRTC for sm_90a, ptxas resources
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <tilepilot/tilepilot.h>

#include "lesson.h"

using namespace tp;

namespace {

struct GemmConfig {
  int64_t bm, bn, bk;
  int stages, threads;
};

// Code i (0..7) of a word: `>>` copies the sign bit into the top, which the mask drops.
Expr code(const Expr& w, int i) {
  return (w >> (4 * i)) & 15;
}

// code - 8 as an f32 without an int-to-float conversion (a quarter of the f32 rate): put the
// code in the low mantissa bits of 2^23 and read the bits as the f32 2^23 + code.
Expr centred(const Expr& w, int i) {
  return bitcast(f32, code(w, i) | 0x4B000000) - 8388616.0f; // 2^23 + 8
}

Kernel int4_gemm(const GemmConfig& c, int64_t group) {
  Dim M("M"), N("N"), K("K"), KW("KW"), KG("KG");
  Tensor A("A", {M, K}, bf16), W("W", {KW, N}, i32), S("scales", {KG, N}, bf16);
  Tensor C("C", {M, N}, bf16);
  auto body = [&](Var bx, Var by) {
    Tile As = alloc_shared({c.bm, c.bk}, bf16), Bs = alloc_shared({c.bk, c.bn}, bf16);
    Tile Ws = alloc_shared({c.bk / 8, c.bn}, i32), s = alloc_shared({1, c.bn}, bf16);
    Tile acc = alloc_fragment({c.bm, c.bn}, f32);
    clear(acc);
    pipelined(ceildiv(K, c.bk), c.stages, [&](Var k) {
      // The words and the step's scale row are copies too, so the pipeline fetches them stages
      // ahead with A (one TMA load each on sm_90a); the unpacking reads shared memory.
      copy(A.tile(by * c.bm, k * c.bk), As);
      copy(W.tile(k * (c.bk / 8), bx * c.bn), Ws);
      copy(S.tile(k * c.bk / group, bx * c.bn), s); // one scale row: the step lies in a group
      parallel({c.bk / 8, c.bn}, [&](Var r, Var j) {
        // Past N the copies read zero words and zero scales: zeros in columns of C that are
        // never stored.
        Var w = let("w", Ws(r, j));
        Var sj = let("sj", cast(f32, s(0, j)));
        for (int i = 0; i < 8; ++i)
          Bs(r * 8 + i, j) = centred(w, i) * sj;
      });
      gemm(As, Bs, acc);
    });
    copy(acc, C.tile(by * c.bm, bx * c.bn));
  };
  return kernel("int4_gemm_g" + std::to_string(group), {A, W, S, C},
                grid(ceildiv(N, c.bn), ceildiv(M, c.bm)), threads(c.threads), body);
}

// Random codes packed as the kernel reads them, and the weights they stand for in fp64.
struct Int4Weights {
  HostTensor words, scales;
  std::vector<double> dense; // [K, N]
};

Int4Weights make_weights(int64_t K, int64_t N, int64_t group, uint64_t seed) {
  Int4Weights q{HostTensor(i32, {K / 8, N}), HostTensor(bf16, {K / group, N}), {}};
  q.scales.fill_random(seed, 0.01, 0.1);
  HostTensor codes(i32, {K, N});
  codes.fill_random(seed + 1, 0, 15.999); // integers 0..15
  q.dense.resize(K * N);
  for (int64_t r = 0; r < K / 8; ++r)
    for (int64_t n = 0; n < N; ++n) {
      uint32_t word = 0;
      for (int i = 0; i < 8; ++i) {
        int64_t k = 8 * r + i, c = static_cast<int64_t>(codes.get(k * N + n)) & 15;
        word |= uint32_t(c) << (4 * i);
        // Stored into the bf16 B tile, code x scale rounds to bf16, as here.
        q.dense[k * N + n] = round_to(bf16, double(c - 8) * q.scales.get(k / group * N + n));
      }
      q.words.set(r * N + n, double(int32_t(word)));
    }
  return q;
}

std::vector<std::pair<int64_t, double>> reference(const HostTensor& a, const Int4Weights& q,
                                                  int64_t N, const std::vector<int64_t>& at) {
  const int64_t K = a.shape()[1];
  std::vector<std::pair<int64_t, double>> want;
  for (int64_t i : at) {
    int64_t m = i / N, n = i % N;
    double s = 0;
    for (int64_t k = 0; k < K; ++k)
      s += a.get(m * K + k) * q.dense[k * N + n];
    want.emplace_back(i, s);
  }
  return want;
}

// C rounds once to bf16 (2^-8 relative); f32 accumulation of K products adds ~K 2^-24.
constexpr double kAtol = 2e-3, kRtol = 1.0 / 128;

bool run_cpu() {
  const int64_t M = 77, N = 45, K = 160, group = 32;
  HostTensor a(bf16, {M, K}), c(bf16, {M, N});
  a.fill_random(1);
  Int4Weights q = make_weights(K, N, group, 2);
  c.poison();
  interpret(int4_gemm({64, 32, 32, 2, 128}, group), {a, q.words, q.scales, c});
  return lesson::check("CPU 77 x 45 x 160", c, reference(a, q, N, lesson::all(M * N)), kAtol,
                       kRtol);
}

constexpr int64_t kGpuGroup = 128;

// The kernels --gpu runs, in their GPU config. 256-row tiles: the unpacking per step grows with
// bk * bn and the tensor cores' work with bm * bn * bk, so taller tiles unpack less per flop
// (the w4a16_gemm operator: 0.2701 -> 0.2471 ms at 4096^3 on an H100, 2026-12-06).
std::vector<Kernel> gpu_kernels() {
  return {int4_gemm({256, 128, 64, 4, 256}, kGpuGroup)};
}

bool run_gpu() {
  const int64_t M = 4096, N = 4096, K = 4096, group = kGpuGroup;
  CompiledKernel ck = compile(gpu_kernels()[0]);
  HostTensor a(bf16, {M, K});
  a.fill_random(1);
  Int4Weights q = make_weights(K, N, group, 2);
  DeviceArray da = DeviceArray::from(a), dw = DeviceArray::from(q.words);
  DeviceArray ds = DeviceArray::from(q.scales), dc(bf16, {M, N});
  dc.fill_bytes(0xff);
  std::vector<Arg> args = {da, dw, ds, dc};
  ck.launch(args);
  synchronize();
  bool ok = lesson::check("GPU 4096^3 (256 samples)", dc.to_host(),
                          reference(a, q, N, lesson::sample(M * N)), kAtol, kRtol);
  lesson::report_flops(time(ck, args, {.runs = 20, .flush_l2 = true}), 2.0 * M * N * K);
  return ok;
}

} // namespace

int main(int argc, char** argv) {
  return lesson::main(argc, argv, run_cpu, run_gpu, gpu_kernels);
}
