// Lesson 6: GEMV, y = A x with A [M, K], x [K], y [M] in bf16 and f32 accumulation. A block
// owns bm rows; it walks K in chunks of bk, multiplying an A tile by the matching slice of x
// into per-element partial sums, and reduces those along K once at the end. K is a Dim: the
// last chunk reads zeros past K, which add nothing. The loop asks for a 3-stage cp.async
// pipeline: the compiler stages the A and x tiles through shared memory, loaded two steps ahead
// of their use (src/passes/StageFragmentLoads.h), where A's rows are 16-byte aligned (K a
// multiple of 8); with other K the loop runs serially, each step waiting for its own loads.
// Teaches: a loop over a symbolic extent, accumulating in a fragment, a reduction after it, a
// pipelined loop over fragment copies.
// Run: build/example_06_gemv         CPU interpreter, M = 77, K = 333, 16 x 64 chunks
//      build/example_06_gemv --gpu   H200: 16384 x 8192 and 16383 x 8191 (the serial version),
//                                    checked on all of y, timed, TB/s
//      build/example_06_gemv --compile  no GPU: NVRTC for sm_90a, ptxas resources
#include <utility>
#include <vector>

#include <tilepilot/tilepilot.h>

#include "lesson.h"

using namespace tp;

namespace {

Kernel gemv(int64_t bm, int64_t bk, int nthreads) {
  Dim M("M"), K("K");
  Tensor A("A", {M, K}, bf16), X("x", {K}, bf16), Y("y", {M}, bf16);
  auto body = [&](Var by) {
    Tile a = alloc_fragment({bm, bk}, f32), x = alloc_fragment({bk}, f32);
    Tile part = alloc_fragment({bm, bk}, f32), y = alloc_fragment({bm}, f32);
    clear(part);
    pipelined(ceildiv(K, bk), {.stages = 3, .copies = Schedule::Copies::cp_async}, [&](Var k) {
      copy(A.tile(by * bm, k * bk), a);
      copy(X.tile(k * bk), x);
      parallel({bm, bk}, [&](Var i, Var j) { part(i, j) = part(i, j) + a(i, j) * x(j); });
    });
    reduce_sum(part, y, 1);
    copy(y, Y.tile(by * bm));
  };
  return kernel("gemv", {A, X, Y}, grid(ceildiv(M, bm)), threads(nthreads), body);
}

std::vector<std::pair<int64_t, double>> reference(const HostTensor& a, const HostTensor& x) {
  const int64_t M = a.shape()[0], K = a.shape()[1];
  std::vector<std::pair<int64_t, double>> want;
  for (int64_t m = 0; m < M; ++m) {
    double s = 0;
    for (int64_t k = 0; k < K; ++k)
      s += a.get(m * K + k) * x.get(k);
    want.emplace_back(m, s);
  }
  return want;
}

// y rounds to bf16 (2^-8 relative); the f32 sum of K products of size ~1 is off by ~K 2^-24,
// which atol covers for values near zero.
constexpr double kAtol = 2e-3, kRtol = 1.0 / 128;

bool run_cpu() {
  const int64_t M = 77, K = 333;
  HostTensor a(bf16, {M, K}), x(bf16, {K}), y(bf16, {M});
  a.fill_random(1);
  x.fill_random(2);
  y.poison();
  interpret(gemv(16, 64, 128), {a, x, y});
  return lesson::check("CPU 77 x 333", y, reference(a, x), kAtol, kRtol);
}

// The kernels --gpu runs, in their GPU config.
std::vector<Kernel> gpu_kernels() {
  return {gemv(16, 256, 256)};
}

bool run_gpu(int64_t M, int64_t K, const CompiledKernel& ck) {
  HostTensor a(bf16, {M, K}), x(bf16, {K});
  a.fill_random(1);
  x.fill_random(2);
  DeviceArray da = DeviceArray::from(a), dx = DeviceArray::from(x), dy(bf16, {M});
  dy.fill_bytes(0xff);
  std::vector<Arg> args = {da, dx, dy};
  ck.launch(args);
  synchronize();
  const std::string what = "GPU " + std::to_string(M) + " x " + std::to_string(K);
  bool ok = lesson::check(what.c_str(), dy.to_host(), reference(a, x), kAtol, kRtol);
  // A dominates: read once; x and y are 16 and 32 KiB.
  lesson::report_bytes(time(ck, args, {.runs = 20, .flush_l2 = true}),
                       double(M) * K * 2 + (K + M) * 2);
  return ok;
}

bool run_gpu() {
  CompiledKernel ck = compile(gpu_kernels()[0]);
  bool aligned = run_gpu(16384, 8192, ck);
  return run_gpu(16383, 8191, ck) && aligned;
}

} // namespace

int main(int argc, char** argv) {
  return lesson::main(argc, argv, run_cpu, run_gpu, gpu_kernels);
}
