// Lesson 7: a tiled GEMM, C = A B with A [M, K], B [K, N], C [M, N] in bf16 and an f32
// accumulator in a register fragment. The K loop is `pipelined`: its copies into shared memory
// run `stages` deep ahead of the tensor-core gemm (on sm_90a TMA and warp specialization do it).
// This is the operator library's kernel (src/ops/GemmOp.cpp), written out for one config.
// Teaches: gemm on tiles, pipelined, a schedule annotation (swizzle), TFLOP/s napkin math.
// Run: build/example_07_gemm         CPU interpreter, 77 x 45 x 133 with 64 x 64 x 32 tiles
//      build/example_07_gemm --gpu   H200: 4096^3, checked on 256 sampled elements, TFLOP/s
//      build/example_07_gemm --compile  no GPU: NVRTC for sm_90a, ptxas resources
#include <string>
#include <utility>
#include <vector>

#include <tilepilot/tilepilot.h>

#include "lesson.h"

using namespace tp;

namespace {

struct GemmConfig {
  int64_t bm, bn, bk;
  int stages, threads, swizzle; // swizzle: block-row panel width of the rasterization, 0 = off
};

Kernel gemm_kernel(const GemmConfig& c) {
  Dim M("M"), N("N"), K("K");
  Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16), C("C", {M, N}, bf16);
  auto body = [&](Var bx, Var by) {
    // Blocks that run together walk down panels of `swizzle` block-rows and share B in L2.
    if (c.swizzle > 0) annotate("swizzle", std::to_string(c.swizzle));
    Tile As = alloc_shared({c.bm, c.bk}, bf16), Bs = alloc_shared({c.bk, c.bn}, bf16);
    Tile acc = alloc_fragment({c.bm, c.bn}, f32);
    clear(acc);
    pipelined(ceildiv(K, c.bk), c.stages, [&](Var k) {
      copy(A.tile(by * c.bm, k * c.bk), As);
      copy(B.tile(k * c.bk, bx * c.bn), Bs);
      gemm(As, Bs, acc);
    });
    copy(acc, C.tile(by * c.bm, bx * c.bn)); // f32 -> bf16, edges dropped
  };
  return kernel("gemm", {A, B, C}, grid(ceildiv(N, c.bn), ceildiv(M, c.bm)), threads(c.threads),
                body);
}

// C[m, n] in fp64 for the given flat indices of C.
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

// C rounds once to bf16 (2^-8 relative); f32 accumulation of K products adds ~K 2^-24.
constexpr double kAtol = 2e-3, kRtol = 1.0 / 128;

bool run_cpu() {
  const int64_t M = 77, N = 45, K = 133;
  HostTensor a(bf16, {M, K}), b(bf16, {K, N}), c(bf16, {M, N});
  a.fill_random(1);
  b.fill_random(2);
  c.poison();
  interpret(gemm_kernel({64, 64, 32, 2, 128, 0}), {a, b, c});
  return lesson::check("CPU 77 x 45 x 133", c, reference(a, b, lesson::all(M * N)), kAtol, kRtol);
}

// The kernels --gpu runs, in their GPU config.
std::vector<Kernel> gpu_kernels() {
  return {gemm_kernel({128, 256, 64, 4, 256, 8})};
}

bool run_gpu() {
  const int64_t M = 4096, N = 4096, K = 4096;
  // The library's sm_90a default for this shape: 128 x 256 tiles, 4 stages, two warpgroups.
  CompiledKernel ck = compile(gpu_kernels()[0]);
  HostTensor a(bf16, {M, K}), b(bf16, {K, N});
  a.fill_random(1);
  b.fill_random(2);
  DeviceArray da = DeviceArray::from(a), db = DeviceArray::from(b), dc(bf16, {M, N});
  dc.fill_bytes(0xff);
  std::vector<Arg> args = {da, db, dc};
  ck.launch(args);
  synchronize();
  bool ok = lesson::check("GPU 4096^3 (256 samples)", dc.to_host(),
                          reference(a, b, lesson::sample(M * N)), kAtol, kRtol);
  lesson::report_flops(time(ck, args, {.runs = 20, .flush_l2 = true}), 2.0 * M * N * K);
  return ok;
}

} // namespace

int main(int argc, char** argv) {
  return lesson::main(argc, argv, run_cpu, run_gpu, gpu_kernels);
}
