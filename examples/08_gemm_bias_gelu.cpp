// Lesson 8: GEMM with a fused epilogue, C = gelu(A B + bias) with bias [N] per column, bf16 in
// and out. The epilogue runs on the f32 accumulator fragment between the K loop and the store,
// so the product never goes to memory unactivated. GELU is the tanh form (PyTorch's
// approximate="tanh"), with tanh written through exp.
// Teaches: element-wise work on a gemm accumulator, a broadcast 1-D tile, building math from exp.
// Run: build/example_08_gemm_bias_gelu         CPU interpreter, 77 x 45 x 133
//      build/example_08_gemm_bias_gelu --gpu   H200: 4096^3, sampled check, TFLOP/s, and
//                                              the ratio to the same GEMM without the epilogue
//      build/example_08_gemm_bias_gelu --compile  no GPU: NVRTC for sm_90a, ptxas resources
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <tilepilot/tilepilot.h>

#include "lesson.h"

using namespace tp;

namespace {

struct GemmConfig {
  int64_t bm, bn, bk;
  int stages, threads, swizzle;
};

constexpr double kSqrt2OverPi = 0.7978845608028654;

// gelu(v) = v/2 (1 + tanh(u)), u = sqrt(2/pi) (v + 0.044715 v^3); tanh(u) = 1 - 2/(e^{2u} + 1),
// which is +-1 in the limits, never inf/inf.
Expr gelu(const Expr& v) {
  Expr u = kSqrt2OverPi * (v + 0.044715 * v * v * v);
  Expr t = 1.0 - 2.0 / (exp(2.0 * u) + 1.0); // later: tanh()
  return 0.5 * v * (1.0 + t);
}

// epilogue = false: the same kernel storing A B (bias unused), the baseline of --gpu's ratio.
Kernel gemm_bias_gelu(const GemmConfig& c, bool epilogue = true) {
  Dim M("M"), N("N"), K("K");
  Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16), bias("bias", {N}, bf16);
  Tensor C("C", {M, N}, bf16);
  auto body = [&](Var bx, Var by) {
    if (c.swizzle > 0) annotate("swizzle", std::to_string(c.swizzle));
    Tile As = alloc_shared({c.bm, c.bk}, bf16), Bs = alloc_shared({c.bk, c.bn}, bf16);
    Tile acc = alloc_fragment({c.bm, c.bn}, f32), b = alloc_fragment({c.bn}, f32);
    clear(acc);
    pipelined(ceildiv(K, c.bk), c.stages, [&](Var k) {
      copy(A.tile(by * c.bm, k * c.bk), As);
      copy(B.tile(k * c.bk, bx * c.bn), Bs);
      gemm(As, Bs, acc);
    });
    if (epilogue) {
      copy(bias.tile(bx * c.bn), b);
      parallel({c.bm, c.bn}, [&](Var i, Var j) { acc(i, j) = gelu(acc(i, j) + b(j)); });
    }
    copy(acc, C.tile(by * c.bm, bx * c.bn));
  };
  return kernel("gemm_bias_gelu", {A, B, bias, C}, grid(ceildiv(N, c.bn), ceildiv(M, c.bm)),
                threads(c.threads), body);
}

std::vector<std::pair<int64_t, double>> reference(const HostTensor& a, const HostTensor& b,
                                                  const HostTensor& bias,
                                                  const std::vector<int64_t>& at) {
  const int64_t K = a.shape()[1], N = b.shape()[1];
  std::vector<std::pair<int64_t, double>> want;
  for (int64_t i : at) {
    int64_t m = i / N, n = i % N;
    double v = bias.get(n);
    for (int64_t k = 0; k < K; ++k)
      v += a.get(m * K + k) * b.get(k * N + n);
    want.emplace_back(i, 0.5 * v * (1 + std::tanh(kSqrt2OverPi * (v + 0.044715 * v * v * v))));
  }
  return want;
}

// C rounds once to bf16 (2^-8 relative); the f32 sum and exp add ~K 2^-24 before GELU, whose
// slope is at most ~1.13.
constexpr double kAtol = 3e-3, kRtol = 1.0 / 128;

bool run_cpu() {
  const int64_t M = 77, N = 45, K = 133;
  HostTensor a(bf16, {M, K}), b(bf16, {K, N}), bias(bf16, {N}), c(bf16, {M, N});
  a.fill_random(1);
  b.fill_random(2);
  bias.fill_random(3);
  c.poison();
  interpret(gemm_bias_gelu({64, 64, 32, 2, 128, 0}), {a, b, bias, c});
  return lesson::check("CPU 77 x 45 x 133", c, reference(a, b, bias, lesson::all(M * N)), kAtol,
                       kRtol);
}

// The kernels --gpu runs, in their GPU config: with the epilogue, and without it.
std::vector<Kernel> gpu_kernels() {
  const GemmConfig c = {128, 256, 64, 4, 256, 8};
  return {gemm_bias_gelu(c), gemm_bias_gelu(c, false)};
}

bool run_gpu() {
  const int64_t M = 4096, N = 4096, K = 4096;
  std::vector<Kernel> kernels = gpu_kernels();
  CompiledKernel ck = compile(kernels[0]), plain = compile(kernels[1]);
  HostTensor a(bf16, {M, K}), b(bf16, {K, N}), bias(bf16, {N});
  a.fill_random(1);
  b.fill_random(2);
  bias.fill_random(3);
  DeviceArray da = DeviceArray::from(a), db = DeviceArray::from(b);
  DeviceArray dbias = DeviceArray::from(bias), dc(bf16, {M, N});
  dc.fill_bytes(0xff);
  std::vector<Arg> args = {da, db, dbias, dc};
  ck.launch(args);
  synchronize();
  bool ok = lesson::check("GPU 4096^3 (256 samples)", dc.to_host(),
                          reference(a, b, bias, lesson::sample(M * N)), kAtol, kRtol);
  // The epilogue's ~10 flops per output are 0.1 % of the 2K per output of the product.
  TimeResult t = time(ck, args, {.runs = 20, .flush_l2 = true});
  lesson::report_flops(t, 2.0 * M * N * K);
  // The same GEMM without the epilogue, timed in this run: the epilogue's cost is the ratio.
  TimeResult t_plain = time(plain, args, {.runs = 20, .flush_l2 = true});
  std::printf("GPU, no epilogue: %.3f ms; with the epilogue %.0f TFLOP/s vs %.0f: %.3fx\n",
              t_plain.median_ms, 2.0 * M * N * K / (t.median_ms * 1e9),
              2.0 * M * N * K / (t_plain.median_ms * 1e9), t_plain.median_ms / t.median_ms);
  return ok;
}

} // namespace

int main(int argc, char** argv) {
  return lesson::main(argc, argv, run_cpu, run_gpu, gpu_kernels);
}
