// Lesson 3: a transpose, B[N, M] = A[M, N]^T in bf16. A block reads a b x b tile of A with
// coalesced rows into shared memory, and a `parallel` loop reads it column-wise into a fragment
// that is stored as a tile of B, again with coalesced rows: the shared tile is where the
// transpose happens, so neither global access is strided.
// Teaches: shared memory as a staging buffer, index arithmetic in a parallel loop.
// Run: build/example_03_transpose         CPU interpreter, 77 x 133 with 32 x 32 tiles, exact
//      build/example_03_transpose --gpu   H200: 8192 x 8192, checked exactly, timed, TB/s
//      build/example_03_transpose --compile  no GPU: NVRTC for sm_90a, ptxas resources
#include <utility>
#include <vector>

#include <tilepilot/tilepilot.h>

#include "lesson.h"

using namespace tp;

namespace {

Kernel transpose(int64_t b) {
  Dim M("M"), N("N");
  Tensor A("A", {M, N}, bf16), B("B", {N, M}, bf16);
  auto body = [&](Var bx, Var by) {
    Tile s = alloc_shared({b, b}, bf16), t = alloc_fragment({b, b}, bf16);
    copy(A.tile(by * b, bx * b), s);                            // rows of A
    parallel({b, b}, [&](Var i, Var j) { t(i, j) = s(j, i); }); // through shared memory
    copy(t, B.tile(bx * b, by * b));                            // rows of B
  };
  return kernel("transpose", {A, B}, grid(ceildiv(N, b), ceildiv(M, b)), threads(128), body);
}

std::vector<std::pair<int64_t, double>> reference(const HostTensor& a) {
  const int64_t M = a.shape()[0], N = a.shape()[1];
  std::vector<std::pair<int64_t, double>> want;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m)
      want.emplace_back(n * M + m, a.get(m * N + n));
  return want;
}

bool run_cpu() {
  HostTensor a(bf16, {77, 133}), b(bf16, {133, 77});
  a.fill_random(1);
  b.poison();
  interpret(transpose(32), {a, b});
  return lesson::check("CPU 77 x 133", b, reference(a), 0, 0); // a permutation: exact
}

// The kernels --gpu runs, in their GPU config. 64 x 64 tiles: on an H100 (bench_memory_bound,
// 2026-12-07, call b10) 0.0989 ms at 8192 x 8192 (92 % of the copy) against 0.1011 (89 %) with
// 32 x 32 ones, and 0.1865 against 0.2669 ms at 8191 x 8193. On 2026-12-02 the 32 x 32 tiles had
// won (76 % against 55 %), before the shared tile was swizzled for its column reads and a
// thread's four chunk loads went out together. Where B's rows are not 16-byte aligned (8191 x
// 8193), annotate("staged_stores", "1") would have the compiler store t through a second shared
// tile, cut at B's own 16-byte blocks (`--show` prints the plan). That pass is off by default
// until it has run on a GPU (docs/schedules.md), so this lesson leaves it out.
std::vector<Kernel> gpu_kernels() {
  return {transpose(64)};
}

bool run_gpu() {
  const int64_t M = 8192, N = 8192;
  CompiledKernel ck = compile(gpu_kernels()[0]);
  HostTensor a(bf16, {M, N});
  a.fill_random(1);
  DeviceArray da = DeviceArray::from(a), db(bf16, {N, M});
  db.fill_bytes(0xff);
  ck.launch({da, db});
  synchronize();
  bool ok = lesson::check("GPU 8192 x 8192", db.to_host(), reference(a), 0, 0);
  lesson::report_bytes(time(ck, {da, db}, {.runs = 20, .flush_l2 = true}), double(M) * N * 4);
  return ok;
}

} // namespace

int main(int argc, char** argv) {
  return lesson::main(argc, argv, run_cpu, run_gpu, gpu_kernels);
}
