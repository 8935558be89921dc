// Lesson 1: a tile copy. B = A with bf16 widened to f32. Each block copies one bm x bn tile of A
// through shared memory into B; edge blocks read zeros past the end of A and their writes past
// the end of B are dropped, so any shape works with any tile.
// Teaches: kernel(), Dim, Tensor, grid, alloc_shared, copy, tp::interpret, tp::compile.
// Run: build/example_01_tile_copy          CPU interpreter, 100 x 130, checked exactly
//      build/example_01_tile_copy --gpu    H200: 8192 x 8192, checked exactly, timed
#include <cstdio>
#include <string>

#include <tilepilot/tilepilot.h>

using namespace tp;

namespace {

Kernel tile_copy(int64_t bm, int64_t bn) {
  Dim M("M"), N("N");
  Tensor A("A", {M, N}, bf16), B("B", {M, N}, f32);
  return kernel("tile_copy", {A, B}, grid(ceildiv(N, bn), ceildiv(M, bm)), threads(128),
                [&](Var bx, Var by) {
    Tile t = alloc_shared({bm, bn}, bf16);
    copy(A.tile(by * bm, bx * bn), t); // global -> shared
    copy(t, B.tile(by * bm, bx * bn)); // shared -> global, bf16 -> f32
  });
}

// Widening bf16 to f32 is exact, so every element must match bit for bit.
int64_t count_wrong(const HostTensor& a, const HostTensor& b) {
  int64_t wrong = 0;
  for (int64_t i = 0; i < a.numel(); ++i) wrong += a.get(i) != b.get(i);
  return wrong;
}

bool run_cpu() {
  Kernel k = tile_copy(32, 64);
  std::printf("%s\n", to_string(k).c_str());
  HostTensor a(bf16, {100, 130}), b(f32, {100, 130});
  a.fill_random(1);
  b.poison(); // NaN everywhere: an element the kernel forgets cannot pass
  interpret(k, {a, b});
  int64_t wrong = count_wrong(a, b);
  std::printf("CPU: copied %lld elements, %lld wrong\n", (long long)a.numel(), (long long)wrong);
  return wrong == 0;
}

bool run_gpu() {
  const int64_t M = 8192, N = 8192;
  CompiledKernel ck = compile(tile_copy(64, 128));
  HostTensor a(bf16, {M, N});
  a.fill_random(1);
  DeviceArray da = DeviceArray::from(a), db(f32, {M, N});
  db.fill_bytes(0xff);
  ck.launch({da, db});
  synchronize();
  int64_t wrong = count_wrong(a, db.to_host());
  std::printf("GPU: %lld x %lld, %lld wrong\n", (long long)M, (long long)N, (long long)wrong);
  TimeResult t = time(ck, {da, db}, {.runs = 20, .flush_l2 = true});
  // Napkin math: every element is read once (2 bytes) and written once (4 bytes).
  double bytes = double(M) * N * (2 + 4), tbs = bytes / (t.median_ms * 1e-3) / 1e12;
  double copy_tbs = measure_copy_bandwidth() / 1e3;
  std::printf("GPU: %.3f ms (median of 20, L2 flushed), %.0f MB moved, %.2f TB/s = %.0f %% of "
              "the %.2f TB/s device-to-device copy\n",
              t.median_ms, bytes / 1e6, tbs, 100 * tbs / copy_tbs, copy_tbs);
  return wrong == 0;
}

} // namespace

int main(int argc, char** argv) {
  bool gpu = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) != "--gpu") {
      std::fprintf(stderr, "usage: %s [--gpu]\n", argv[0]);
      return 2;
    }
    gpu = true;
  }
  try {
    std::string why;
    if (gpu && !gpu_available(&why)) {
      std::fprintf(stderr, "%s: --gpu needs a CUDA GPU, and none can be used here: %s\n", argv[0],
                   why.c_str());
      return 2;
    }
    return (gpu ? run_gpu() : run_cpu()) ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 1;
  }
}
