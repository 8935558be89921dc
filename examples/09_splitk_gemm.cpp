// Lesson 9: split-K GEMM, C += A B with the K loop split over `splits` blocks per output tile
// (grid z). Each block accumulates its share of K in a fragment and adds it into C, an f32
// tensor the caller zeroes, with atomics. For shapes with few output tiles and a long K, this
// fills the GPU where a plain GEMM would leave SMs idle (M = N = 1024, K = 16384: 32 tiles of
// 128 x 256 for 132 SMs; with 4 splits, 128).
// Teaches: a 3-D grid, a block-dependent loop range, the tile form of atomic_add.
// Run: build/example_09_splitk_gemm         CPU interpreter, 77 x 45 x 333, 3 splits
//      build/example_09_splitk_gemm --gpu   H200: 1024 x 1024 x 16384, 4 splits, TFLOP/s
//      build/example_09_splitk_gemm --compile  no GPU: NVRTC for sm_90a, ptxas resources
#include <utility>
#include <vector>

#include <tilepilot/tilepilot.h>

#include "lesson.h"

using namespace tp;

namespace {

struct GemmConfig {
  int64_t bm, bn, bk;
  int stages, threads, splits;
};

Kernel splitk_gemm(const GemmConfig& c) {
  Dim M("M"), N("N"), K("K");
  Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16), C("C", {M, N}, f32);
  auto body = [&](Var bx, Var by, Var z) {
    Tile As = alloc_shared({c.bm, c.bk}, bf16), Bs = alloc_shared({c.bk, c.bn}, bf16);
    Tile acc = alloc_fragment({c.bm, c.bn}, f32);
    // Split z takes K blocks [z per, min((z + 1) per, nk)); a trailing split may get none.
    Expr nk = ceildiv(K, c.bk), per = ceildiv(nk, c.splits);
    Expr k0 = z * per, count = max(min(per, nk - k0), 0);
    clear(acc);
    pipelined(count, c.stages, [&](Var kk) {
      copy(A.tile(by * c.bm, (k0 + kk) * c.bk), As);
      copy(B.tile((k0 + kk) * c.bk, bx * c.bn), Bs);
      gemm(As, Bs, acc);
    });
    // The tile form drops the elements past C's edges, as a copy does. On sm_90a each thread's
    // two adjacent accumulator columns go out as one paired reduction (red.global.add.v2.f32).
    atomic_add(C.tile(by * c.bm, bx * c.bn), acc);
  };
  return kernel("splitk_gemm", {A, B, C}, grid(ceildiv(N, c.bn), ceildiv(M, c.bm), c.splits),
                threads(c.threads), body);
}

// C = 0 on the GPU stream, so zeroing and the split-K launch queue back to back.
Kernel zero_fill(int64_t bm, int64_t bn) {
  Dim M("M"), N("N");
  Tensor C("C", {M, N}, f32);
  auto body = [&](Var bx, Var by) {
    Tile z = alloc_fragment({bm, bn}, f32);
    clear(z);
    copy(z, C.tile(by * bm, bx * bn));
  };
  return kernel("zero_fill", {C}, grid(ceildiv(N, bn), ceildiv(M, bm)), threads(128), body);
}

std::vector<std::pair<int64_t, double>> reference(const HostTensor& a, const HostTensor& b,
                                                  const std::vector<int64_t>& at) {
  const int64_t K = a.shape()[1], N = b.shape()[1];
  std::vector<std::pair<int64_t, double>> want;
  for (int64_t i : at) {
    int64_t m = i / N, n = i % N;
    double s = 0;
    for (int64_t k = 0; k < K; ++k)
      s += a.get(m * K + k) * b.get(k * N + n);
    want.emplace_back(i, s);
  }
  return want;
}

// C stays f32: only the f32 accumulation (~K 2^-24 relative to the terms' size) and the
// order of the atomic adds differ from fp64.
constexpr double kAtol = 1e-3, kRtol = 1e-4;

bool run_cpu() {
  const int64_t M = 77, N = 45, K = 333;
  HostTensor a(bf16, {M, K}), b(bf16, {K, N}), c(f32, {M, N});
  a.fill_random(1);
  b.fill_random(2);
  c.poison();
  interpret(zero_fill(16, 32), {c}); // the atomics add into C
  interpret(splitk_gemm({64, 32, 32, 2, 128, 3}), {a, b, c});
  return lesson::check("CPU 77 x 45 x 333, 3 splits", c, reference(a, b, lesson::all(M * N)), kAtol,
                       kRtol);
}

// The kernels --gpu runs, in their GPU config.
std::vector<Kernel> gpu_kernels() {
  return {splitk_gemm({128, 256, 64, 4, 256, 4}), zero_fill(32, 128)};
}

bool run_gpu() {
  const int64_t M = 1024, N = 1024, K = 16384;
  std::vector<Kernel> ks = gpu_kernels();
  CompiledKernel ck = compile(ks[0]), zero = compile(ks[1]);
  HostTensor a(bf16, {M, K}), b(bf16, {K, N});
  a.fill_random(1);
  b.fill_random(2);
  DeviceArray da = DeviceArray::from(a), db = DeviceArray::from(b), dc(f32, {M, N});
  dc.fill_bytes(0xff);
  std::vector<Arg> args = {da, db, dc};
  zero.launch({dc});
  ck.launch(args);
  synchronize();
  bool ok = lesson::check("GPU 1024 x 1024 x 16384 (256 samples)", dc.to_host(),
                          reference(a, b, lesson::sample(M * N)), kAtol * 4, kRtol);
  // Timed with the zeroing of C (4 MiB, ~2 us) in each run, as a caller has to.
  TimeResult t = time(
      [&](Stream s) {
        zero.launch({dc}, s);
        ck.launch(args, s);
      },
      {.runs = 20, .flush_l2 = true});
  lesson::report_flops(t, 2.0 * M * N * K);
  return ok;
}

} // namespace

int main(int argc, char** argv) {
  return lesson::main(argc, argv, run_cpu, run_gpu, gpu_kernels);
}
