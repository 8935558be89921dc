// Lesson 1: a tile copy. B = A with bf16 widened to f32. Each block copies one bm x bn tile of A
// through shared memory into B; edge blocks read zeros past the end of A and their writes past
// the end of B are dropped, so any shape works with any tile.
// Teaches: kernel(), Dim, Tensor, grid, alloc_shared, copy, tp::interpret, tp::compile.
// Run: build/example_01_tile_copy          CPU interpreter, 100 x 130, checked exactly
//      build/example_01_tile_copy --gpu    H200: 8192 x 8192, checked exactly, timed, TB/s
//      build/example_01_tile_copy --compile   no GPU needed: NVRTC for sm_90a, ptxas resources
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <tilepilot/tilepilot.h>

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

// |got - want| <= atol + rtol |want| at every checked (flat index, value) pair; NaN fails.
bool check(const char* what, const HostTensor& got,
           const std::vector<std::pair<int64_t, double>>& want, double atol, double rtol) {
  double max_err = 0, bad_got = 0, bad_want = 0;
  int64_t bad = 0, bad_at = -1;
  for (const auto& [i, w] : want) {
    double g = got.get(i), err = std::fabs(g - w);
    if (!(err <= atol + rtol * std::fabs(w)) && bad++ == 0) bad_at = i, bad_got = g, bad_want = w;
    if (err > max_err) max_err = err;
  }
  std::printf("%s: %zu elements checked (atol %g, rtol %g), max error %.3g: ", what, want.size(),
              atol, rtol, max_err);
  if (bad == 0)
    std::printf("pass\n");
  else
    std::printf("FAIL, %lld wrong, the first at flat index %lld: %g, want %g\n", (long long)bad,
                (long long)bad_at, bad_got, bad_want);
  return bad == 0;
}

// Napkin math of a memory-bound kernel: bytes read once and written once, against the
// device-to-device copy bandwidth measured in this run.
void report_bytes(const TimeResult& t, double bytes) {
  double tbs = bytes / (t.median_ms * 1e-3) / 1e12, copy_tbs = measure_copy_bandwidth() / 1e3;
  std::printf("GPU: %.3f ms (median of %zu, L2 flushed), %.0f MB moved, %.2f TB/s = %.0f %% of "
              "the %.2f TB/s device-to-device copy\n",
              t.median_ms, t.samples_ms.size(), bytes / 1e6, tbs, 100 * tbs / copy_tbs, copy_tbs);
}

// Napkin math of a compute-bound kernel, against the H200's stated bf16 dense peak.
void report_flops(const TimeResult& t, double flops) {
  const double peak = 989; // TFLOP/s, H200 SXM bf16 dense tensor cores
  double tf = flops / (t.median_ms * 1e-3) / 1e12;
  std::printf("GPU: %.3f ms (median of %zu, L2 flushed), %.1f GFLOP, %.0f TFLOP/s = %.0f %% of "
              "the %.0f TFLOP/s bf16 peak\n",
              t.median_ms, t.samples_ms.size(), flops / 1e9, tf, 100 * tf / peak, peak);
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
  return check("CPU 100 x 130", b, reference(a), 0, 0);
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
  bool ok = check("GPU 8192 x 8192", db.to_host(), reference(a), 0, 0);
  // Every element is read once (2 bytes) and written once (4 bytes).
  report_bytes(time(ck, {da, db}, {.runs = 20, .flush_l2 = true}), double(M) * N * (2 + 4));
  return ok;
}

} // namespace

// --compile: lowers the --gpu kernels and compiles them with NVRTC for sm_90a, which needs no
// GPU, and prints what ptxas reports.
bool compile_only() {
  for (const Kernel& k : gpu_kernels()) {
    CompiledKernel ck = compile(k, {.arch = "sm_90a"});
    Resources r = ck.resources();
    std::printf("sm_90a: %d threads, %d registers, %d spill bytes, %lld + %d bytes of shared "
                "memory%s\n",
                r.threads, r.registers, r.spill_bytes, (long long)r.smem_dynamic, r.smem_static,
                r.wgmma_serialized ? ", wgmma serialized" : "");
  }
  return true;
}

int main(int argc, char** argv) {
  std::string mode = argc == 2 ? argv[1] : "";
  if (argc > 2 || (argc == 2 && mode != "--gpu" && mode != "--compile")) {
    std::fprintf(stderr, "usage: %s [--gpu | --compile]\n", argv[0]);
    return 2;
  }
  try {
    std::string why;
    if (mode == "--gpu" && !gpu_available(&why)) {
      std::fprintf(stderr, "%s: --gpu needs a CUDA GPU, and none can be used here: %s\n", argv[0],
                   why.c_str());
      return 2;
    }
    bool ok = mode == "--gpu" ? run_gpu() : mode == "--compile" ? compile_only() : run_cpu();
    return ok ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 1;
  }
}
