// Lesson 6: GEMV, y = A x with A [M, K], x [K], y [M] in bf16 and f32 accumulation. A block
// owns bm rows; it walks K in chunks of bk, multiplying an A tile by the matching slice of x
// into per-element partial sums, and reduces those along K once at the end. K is a Dim: the
// last chunk reads zeros past K, which add nothing.
// Teaches: a loop over a symbolic extent, accumulating in a fragment, a reduction after it.
// Run: build/example_06_gemv         CPU interpreter, M = 77, K = 333, 16 x 64 chunks
//      build/example_06_gemv --gpu   H200: 16384 x 8192, checked on all of y, timed, TB/s
//      build/example_06_gemv --compile  no GPU: NVRTC for sm_90a, ptxas resources
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <tilepilot/tilepilot.h>

using namespace tp;

namespace {

Kernel gemv(int64_t bm, int64_t bk, int nthreads) {
  Dim M("M"), K("K");
  Tensor A("A", {M, K}, bf16), X("x", {K}, bf16), Y("y", {M}, bf16);
  auto body = [&](Var by) {
    Tile a = alloc_fragment({bm, bk}, f32), x = alloc_fragment({bk}, f32);
    Tile part = alloc_fragment({bm, bk}, f32), y = alloc_fragment({bm}, f32);
    clear(part);
    serial(ceildiv(K, bk), [&](Var k) {
      copy(A.tile(by * bm, k * bk), a);
      copy(X.tile(k * bk), x);
      parallel({bm, bk}, [&](Var i, Var j) { part(i, j) = part(i, j) + a(i, j) * x(j); });
    });
    reduce_sum(part, y, 1);
    copy(y, Y.tile(by * bm));
  };
  return kernel("gemv", {A, X, Y}, grid(ceildiv(M, bm)), threads(nthreads), body);
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
  return check("CPU 77 x 333", y, reference(a, x), kAtol, kRtol);
}

// The kernels --gpu runs, in their GPU config.
std::vector<Kernel> gpu_kernels() {
  return {gemv(16, 256, 256)};
}

bool run_gpu() {
  const int64_t M = 16384, K = 8192;
  CompiledKernel ck = compile(gpu_kernels()[0]);
  HostTensor a(bf16, {M, K}), x(bf16, {K});
  a.fill_random(1);
  x.fill_random(2);
  DeviceArray da = DeviceArray::from(a), dx = DeviceArray::from(x), dy(bf16, {M});
  dy.fill_bytes(0xff);
  std::vector<Arg> args = {da, dx, dy};
  ck.launch(args);
  synchronize();
  bool ok = check("GPU 16384 x 8192", dy.to_host(), reference(a, x), kAtol, kRtol);
  // A dominates: read once; x and y are 16 and 32 KiB.
  report_bytes(time(ck, args, {.runs = 20, .flush_l2 = true}), double(M) * K * 2 + (K + M) * 2);
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
