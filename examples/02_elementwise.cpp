// Lesson 2: element-wise C = (A + B) * scale, bf16 tensors, the arithmetic in f32. Each block
// loads one bm x bn tile of A and of B into register fragments, combines them in a `parallel`
// loop (the CUDA backend spreads it over the block's threads) and stores the tile; the scale is
// a 1-element tensor read inside the loop.
// Teaches: alloc_fragment, parallel, element access, cast, rounding on store.
// Run: build/example_02_elementwise         CPU interpreter, 77 x 133 with 16 x 32 tiles
//      build/example_02_elementwise --gpu   H200: 8191 x 8193, checked, timed, TB/s
//      build/example_02_elementwise --compile  no GPU: NVRTC for sm_90a, ptxas resources
#include <utility>
#include <vector>

#include <tilepilot/tilepilot.h>

#include "lesson.h"

using namespace tp;

namespace {

Kernel scaled_add(int64_t bm, int64_t bn) {
  Dim M("M"), N("N");
  Tensor A("A", {M, N}, bf16), B("B", {M, N}, bf16), C("C", {M, N}, bf16);
  Tensor scale("scale", {1}, f32); // later: a Scalar kernel parameter
  auto body = [&](Var bx, Var by) {
    Tile a = alloc_fragment({bm, bn}, bf16), b = alloc_fragment({bm, bn}, bf16);
    Tile c = alloc_fragment({bm, bn}, bf16);
    copy(A.tile(by * bm, bx * bn), a);
    copy(B.tile(by * bm, bx * bn), b);
    parallel({bm, bn}, [&](Var i, Var j) {
      c(i, j) = (cast(f32, a(i, j)) + cast(f32, b(i, j))) * scale(0); // rounds once, to bf16
    });
    copy(c, C.tile(by * bm, bx * bn)); // the edge tile's writes past M, N are dropped
  };
  return kernel("scaled_add", {A, B, scale, C}, grid(ceildiv(N, bn), ceildiv(M, bm)), threads(128),
                body);
}

std::vector<std::pair<int64_t, double>> reference(const HostTensor& a, const HostTensor& b,
                                                  double s) {
  std::vector<std::pair<int64_t, double>> want;
  for (int64_t i = 0; i < a.numel(); ++i)
    want.emplace_back(i, (a.get(i) + b.get(i)) * s);
  return want;
}

// One bf16 rounding of the exact value is at most half an ulp (2^-8 relative); the f32
// intermediates add a few 2^-24. Allowed: one ulp.
constexpr double kAtol = 1e-6, kRtol = 1.0 / 128;

bool run_cpu() {
  const int64_t M = 77, N = 133;
  Kernel k = scaled_add(16, 32);
  HostTensor a(bf16, {M, N}), b(bf16, {M, N}), s(f32, {1}), c(bf16, {M, N});
  a.fill_random(1);
  b.fill_random(2);
  s.set(0, 0.37);
  c.poison();
  interpret(k, {a, b, s, c});
  return lesson::check("CPU 77 x 133", c, reference(a, b, s.get(0)), kAtol, kRtol);
}

// The kernels --gpu runs, in their GPU config. 16 x 256: at 8191 x 8193 it ran 0.178 ms
// against 32 x 128's 0.188 (H100, bench_memory_bound, one process, 2026-12-07); at 8192^2
// both reach the copy's bandwidth. Rows of 8193 elements are not 16-byte aligned: with
// annotate("staged_stores", "1") the compiler would store c through a shared tile, cut at C's
// own 16-byte blocks (`--show` prints the plan; docs/schedules.md). That pass is off by default
// until it has run on a GPU, so this lesson leaves it out.
std::vector<Kernel> gpu_kernels() {
  return {scaled_add(16, 256)};
}

bool run_gpu() {
  const int64_t M = 8191, N = 8193; // odd: every edge path runs
  CompiledKernel ck = compile(gpu_kernels()[0]);
  HostTensor a(bf16, {M, N}), b(bf16, {M, N}), s(f32, {1});
  a.fill_random(1);
  b.fill_random(2);
  s.set(0, 0.37);
  DeviceArray da = DeviceArray::from(a), db = DeviceArray::from(b), ds = DeviceArray::from(s);
  DeviceArray dc(bf16, {M, N});
  dc.fill_bytes(0xff);
  std::vector<Arg> args = {da, db, ds, dc};
  ck.launch(args);
  synchronize();
  bool ok = lesson::check("GPU 8191 x 8193", dc.to_host(), reference(a, b, s.get(0)), kAtol, kRtol);
  // Read A and B once, write C once: 3 x 2 bytes per element.
  lesson::report_bytes(time(ck, args, {.runs = 20, .flush_l2 = true}), double(M) * N * 6);
  return ok;
}

} // namespace

int main(int argc, char** argv) {
  return lesson::main(argc, argv, run_cpu, run_gpu, gpu_kernels);
}
