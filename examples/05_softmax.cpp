// Lesson 5: row softmax, Y = exp(X - max) / sum(exp(X - max)) per row, bf16 in and out, f32
// inside. Like RMSNorm (lesson 4) a block holds bm whole rows, N being a compile-time constant,
// so X is read once: a max reduction, exp2 of the scaled difference, a sum reduction, a divide.
// Rows longer than a block can hold take the online form of lessons 13 and 14.
// Teaches: reduce_max and reduce_sum, exp2 with log2(e) folded into one multiply-add.
// Run: build/example_05_softmax         CPU interpreter, 37 x 300 with 4-row blocks
//      build/example_05_softmax --gpu   H200: 8192 x 8192, checked on sampled rows, timed, TB/s
//      build/example_05_softmax --compile  no GPU: NVRTC for sm_90a, ptxas resources
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

Kernel softmax(int64_t N, int64_t bm, int nthreads) {
  Dim M("M");
  Tensor X("X", {M, N}, bf16), Y("Y", {M, N}, bf16);
  auto body = [&](Var by) {
    Tile x = alloc_fragment({bm, N}, f32);
    Tile m = alloc_fragment({bm}, f32), l = alloc_fragment({bm}, f32);
    copy(X.tile(by * bm, 0), x);
    reduce_max(x, m, 1);
    // exp(x - m) = exp2(x log2e - m log2e): one fused multiply-add and one exp2 per element.
    parallel({bm, N}, [&](Var i, Var j) { x(i, j) = exp2(x(i, j) * kLog2e - m(i) * kLog2e); });
    reduce_sum(x, l, 1);
    parallel({bm}, [&](Var i) { l(i) = 1.0 / l(i); });
    parallel({bm, N}, [&](Var i, Var j) { x(i, j) = x(i, j) * l(i); });
    copy(x, Y.tile(by * bm, 0));
  };
  return kernel("softmax_n" + std::to_string(N), {X, Y}, grid(ceildiv(M, bm)), threads(nthreads),
                body);
}

std::vector<std::pair<int64_t, double>> reference(const HostTensor& x,
                                                  const std::vector<int64_t>& rows) {
  const int64_t N = x.shape()[1];
  std::vector<std::pair<int64_t, double>> want;
  for (int64_t r : rows) {
    double m = -INFINITY, l = 0;
    for (int64_t j = 0; j < N; ++j)
      m = std::max(m, x.get(r * N + j));
    for (int64_t j = 0; j < N; ++j)
      l += std::exp(x.get(r * N + j) - m);
    for (int64_t j = 0; j < N; ++j)
      want.emplace_back(r * N + j, std::exp(x.get(r * N + j) - m) / l);
  }
  return want;
}

// The output rounds once to bf16 (2^-8 relative); exp2 and the f32 sum add ~1e-6.
constexpr double kAtol = 1e-7, kRtol = 1.0 / 128;

bool run_cpu() {
  const int64_t M = 37, N = 300;
  HostTensor x(bf16, {M, N}), y(bf16, {M, N});
  x.fill_random(1, -8, 8);
  y.poison();
  interpret(softmax(N, 4, 128), {x, y});
  return lesson::check("CPU 37 x 300", y, reference(x, lesson::all(M)), kAtol, kRtol);
}

// The kernels --gpu runs, in their GPU config.
std::vector<Kernel> gpu_kernels() {
  return {softmax(8192, 1, 256)};
}

bool run_gpu() {
  const int64_t M = 8192, N = 8192;
  CompiledKernel ck = compile(gpu_kernels()[0]);
  HostTensor x(bf16, {M, N});
  x.fill_random(1, -8, 8);
  DeviceArray dx = DeviceArray::from(x), dy(bf16, {M, N});
  dy.fill_bytes(0xff);
  ck.launch({dx, dy});
  synchronize();
  std::vector<int64_t> rows = {0, 1, 2, 4095, 4096, 8000, M - 1};
  bool ok =
      lesson::check("GPU 8192 x 8192 (7 rows)", dy.to_host(), reference(x, rows), kAtol, kRtol);
  lesson::report_bytes(time(ck, {dx, dy}, {.runs = 20, .flush_l2 = true}), double(M) * N * 4);
  return ok;
}

} // namespace

int main(int argc, char** argv) {
  return lesson::main(argc, argv, run_cpu, run_gpu, gpu_kernels);
}
