// Lesson 1: a tile copy. B = A with bf16 widened to f32. Each block copies one bm x bn tile of A
// through shared memory into B; edge blocks read zeros past the end of A and their writes past
// the end of B are dropped, so any shape works with any tile.
// Teaches: kernel(), Dim, Tensor, grid, alloc_shared, copy, tp::interpret, tp::compile.
// Run: build/example_01_tile_copy          CPU interpreter, 100 x 130, checked exactly
//      build/example_01_tile_copy --gpu    H200: 8192 x 8192, checked exactly, timed, TB/s
//      build/example_01_tile_copy --compile   no GPU needed: NVRTC for sm_90a, ptxas resources
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <tilepilot/tilepilot.h>

#include "lesson.h" // what every lesson shares: check(), the napkin math, main()

using namespace tp;

namespace {

Kernel tile_copy(int64_t bm, int64_t bn) {
  Dim M("M"), N("N");
  Tensor A("A", {M, N}, bf16), B("B", {M, N}, f32);
  auto body = [&](Var bx, Var by) {
    Tile t = alloc_shared({bm, bn}, bf16);
    copy(A.tile(by * bm, bx * bn), t); // global -> shared
    copy(t, B.tile(by * bm, bx * bn)); // shared -> global, bf16 -> f32
  };
  return kernel("tile_copy", {A, B}, grid(ceildiv(N, bn), ceildiv(M, bm)), threads(128), body);
}

// Widening bf16 to f32 is exact: B must equal A element for element.
std::vector<std::pair<int64_t, double>> reference(const HostTensor& a) {
  std::vector<std::pair<int64_t, double>> want;
  for (int64_t i = 0; i < a.numel(); ++i)
    want.emplace_back(i, a.get(i));
  return want;
}

bool run_cpu() {
  Kernel k = tile_copy(32, 64);
  std::printf("%s\n", to_string(k).c_str()); // the kernel's IR
  HostTensor a(bf16, {100, 130}), b(f32, {100, 130});
  a.fill_random(1);
  b.poison(); // NaN everywhere: an element the kernel forgets cannot pass
  interpret(k, {a, b});
  return lesson::check("CPU 100 x 130", b, reference(a), 0, 0);
}

// The kernels --gpu runs, in their GPU config.
std::vector<Kernel> gpu_kernels() {
  return {tile_copy(64, 128)};
}

bool run_gpu() {
  const int64_t M = 8192, N = 8192;
  CompiledKernel ck = compile(gpu_kernels()[0]);
  HostTensor a(bf16, {M, N});
  a.fill_random(1);
  DeviceArray da = DeviceArray::from(a), db(f32, {M, N});
  db.fill_bytes(0xff);
  ck.launch({da, db});
  synchronize();
  bool ok = lesson::check("GPU 8192 x 8192", db.to_host(), reference(a), 0, 0);
  // Every element is read once (2 bytes) and written once (4 bytes).
  lesson::report_bytes(time(ck, {da, db}, {.runs = 20, .flush_l2 = true}), double(M) * N * (2 + 4));
  return ok;
}

} // namespace

int main(int argc, char** argv) {
  return lesson::main(argc, argv, run_cpu, run_gpu, gpu_kernels);
}
