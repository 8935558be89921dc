// Lesson 2: element-wise C = (A + B) * scale, bf16 tensors, the arithmetic in f32. Each block
// loads one bm x bn tile of A and of B into register fragments, combines them in a `parallel`
// loop (the CUDA backend spreads it over the block's threads) and stores the tile; the scale is
// a 1-element tensor read inside the loop.
// Teaches: alloc_fragment, parallel, element access, cast, rounding on store.
// Run: build/example_02_elementwise         CPU interpreter, 77 x 133 with 16 x 32 tiles
//      build/example_02_elementwise --gpu   H200: 8191 x 8193, checked, timed, TB/s
//      build/example_02_elementwise --compile  no GPU: NVRTC for sm_90a, ptxas resources
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <tilepilot/tilepilot.h>

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
  return check("CPU 77 x 133", c, reference(a, b, s.get(0)), kAtol, kRtol);
}

// The kernels --gpu runs, in their GPU config.
std::vector<Kernel> gpu_kernels() {
  return {scaled_add(32, 128)};
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
  bool ok = check("GPU 8191 x 8193", dc.to_host(), reference(a, b, s.get(0)), kAtol, kRtol);
  // Read A and B once, write C once: 3 x 2 bytes per element.
  report_bytes(time(ck, args, {.runs = 20, .flush_l2 = true}), double(M) * N * 6);
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
