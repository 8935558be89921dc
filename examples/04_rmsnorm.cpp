// Lesson 4: RMSNorm with a weight vector, Y = X / sqrt(mean(X^2) + eps) * W, per row; X, W, Y
// bf16, arithmetic in f32. The row length N is a compile-time constant, so a block holds whole
// rows (bm of them) in a fragment: X is read once and Y written once. A row reduction gives the
// sum of squares; edge rows past M read zeros (rsqrt(eps) stays finite) and are not written.
// Teaches: reduce_sum along a dim, broadcasting a per-row value, a 1-D weight tile.
// Run: build/example_04_rmsnorm         CPU interpreter, 37 x 300 with 4-row blocks
//      build/example_04_rmsnorm --gpu   H200: 8192 x 8192, checked on sampled rows, timed, TB/s
//      build/example_04_rmsnorm --compile  no GPU: NVRTC for sm_90a, ptxas resources
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <tilepilot/tilepilot.h>

#include "lesson.h"

using namespace tp;

namespace {

constexpr double kEps = 1e-6;

Kernel rmsnorm(int64_t N, int64_t bm, int nthreads) {
  Dim M("M");
  Tensor X("X", {M, N}, bf16), W("W", {N}, bf16), Y("Y", {M, N}, bf16);
  auto body = [&](Var by) {
    Tile x = alloc_fragment({bm, N}, f32), sq = alloc_fragment({bm, N}, f32);
    Tile w = alloc_fragment({N}, f32), r = alloc_fragment({bm}, f32);
    copy(X.tile(by * bm, 0), x); // bf16 -> f32
    copy(W.tile(0), w);
    parallel({bm, N}, [&](Var i, Var j) { sq(i, j) = x(i, j) * x(i, j); });
    reduce_sum(sq, r, 1);
    parallel({bm}, [&](Var i) { r(i) = rsqrt(r(i) * (1.0 / double(N)) + kEps); });
    parallel({bm, N}, [&](Var i, Var j) { x(i, j) = x(i, j) * r(i) * w(j); });
    copy(x, Y.tile(by * bm, 0));
  };
  return kernel("rmsnorm_n" + std::to_string(N), {X, W, Y}, grid(ceildiv(M, bm)), threads(nthreads),
                body);
}

// The fp64 result for the given rows.
std::vector<std::pair<int64_t, double>> reference(const HostTensor& x, const HostTensor& w,
                                                  const std::vector<int64_t>& rows) {
  const int64_t N = x.shape()[1];
  std::vector<std::pair<int64_t, double>> want;
  for (int64_t m : rows) {
    double ss = 0;
    for (int64_t j = 0; j < N; ++j)
      ss += x.get(m * N + j) * x.get(m * N + j);
    double r = 1.0 / std::sqrt(ss / double(N) + kEps);
    for (int64_t j = 0; j < N; ++j)
      want.emplace_back(m * N + j, x.get(m * N + j) * r * w.get(j));
  }
  return want;
}

// The output rounds once to bf16 (2^-8 relative); the f32 sum of squares adds far less.
constexpr double kAtol = 1e-5, kRtol = 1.0 / 128;

bool run_cpu() {
  const int64_t M = 37, N = 300;
  HostTensor x(bf16, {M, N}), w(bf16, {N}), y(bf16, {M, N});
  x.fill_random(1);
  w.fill_random(2, 0.5, 1.5);
  y.poison();
  interpret(rmsnorm(N, 4, 128), {x, w, y});
  return lesson::check("CPU 37 x 300", y, reference(x, w, lesson::all(M)), kAtol, kRtol);
}

// The kernels --gpu runs, in their GPU config.
std::vector<Kernel> gpu_kernels() {
  return {rmsnorm(8192, 1, 256)};
}

bool run_gpu() {
  const int64_t M = 8192, N = 8192;
  CompiledKernel ck = compile(gpu_kernels()[0]);
  HostTensor x(bf16, {M, N}), w(bf16, {N});
  x.fill_random(1);
  w.fill_random(2, 0.5, 1.5);
  DeviceArray dx = DeviceArray::from(x), dw = DeviceArray::from(w), dy(bf16, {M, N});
  dy.fill_bytes(0xff);
  std::vector<Arg> args = {dx, dw, dy};
  ck.launch(args);
  synchronize();
  std::vector<int64_t> rows = {0, 1, 2, 4095, 4096, 8000, M - 1}; // first, middle, last blocks
  bool ok =
      lesson::check("GPU 8192 x 8192 (7 rows)", dy.to_host(), reference(x, w, rows), kAtol, kRtol);
  // X read once, Y written once, W (16 KiB) negligible: 2 x 2 bytes per element.
  lesson::report_bytes(time(ck, args, {.runs = 20, .flush_l2 = true}), double(M) * N * 4 + N * 2);
  return ok;
}

} // namespace

int main(int argc, char** argv) {
  return lesson::main(argc, argv, run_cpu, run_gpu, gpu_kernels);
}
