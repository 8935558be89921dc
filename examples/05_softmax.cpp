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
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <tilepilot/tilepilot.h>

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
  std::vector<int64_t> rows;
  for (int64_t m = 0; m < M; ++m)
    rows.push_back(m);
  return check("CPU 37 x 300", y, reference(x, rows), kAtol, kRtol);
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
  bool ok = check("GPU 8192 x 8192 (7 rows)", dy.to_host(), reference(x, rows), kAtol, kRtol);
  report_bytes(time(ck, {dx, dy}, {.runs = 20, .flush_l2 = true}), double(M) * N * 4);
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
