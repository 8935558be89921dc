// Lesson 8: GEMM with a fused epilogue, C = gelu(A B + bias) with bias [N] per column, bf16 in
// and out. The epilogue runs on the f32 accumulator fragment between the K loop and the store,
// so the product never goes to memory unactivated. GELU is the tanh form (PyTorch's
// approximate="tanh"), with tanh written through exp.
// Teaches: element-wise work on a gemm accumulator, a broadcast 1-D tile, building math from exp.
// Run: build/example_08_gemm_bias_gelu         CPU interpreter, 77 x 45 x 133
//      build/example_08_gemm_bias_gelu --gpu   H200: 4096^3, sampled check, TFLOP/s
//      build/example_08_gemm_bias_gelu --compile  no GPU: NVRTC for sm_90a, ptxas resources
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <tilepilot/tilepilot.h>

using namespace tp;

namespace {

struct GemmConfig {
  int64_t bm, bn, bk;
  int stages, threads, swizzle;
};

constexpr double kSqrt2OverPi = 0.7978845608028654;

// gelu(v) = v/2 (1 + tanh(u)), u = sqrt(2/pi) (v + 0.044715 v^3); tanh(u) = 1 - 2/(e^{2u} + 1),
// which is +-1 in the limits, never inf/inf.
Expr gelu(const Expr& v) {
  Expr u = kSqrt2OverPi * (v + 0.044715 * v * v * v);
  Expr t = 1.0 - 2.0 / (exp(2.0 * u) + 1.0); // later: tanh()
  return 0.5 * v * (1.0 + t);
}

Kernel gemm_bias_gelu(const GemmConfig& c) {
  Dim M("M"), N("N"), K("K");
  Tensor A("A", {M, K}, bf16), B("B", {K, N}, bf16), bias("bias", {N}, bf16);
  Tensor C("C", {M, N}, bf16);
  auto body = [&](Var bx, Var by) {
    if (c.swizzle > 0) annotate("swizzle", std::to_string(c.swizzle));
    Tile As = alloc_shared({c.bm, c.bk}, bf16), Bs = alloc_shared({c.bk, c.bn}, bf16);
    Tile acc = alloc_fragment({c.bm, c.bn}, f32), b = alloc_fragment({c.bn}, f32);
    clear(acc);
    pipelined(ceildiv(K, c.bk), c.stages, [&](Var k) {
      copy(A.tile(by * c.bm, k * c.bk), As);
      copy(B.tile(k * c.bk, bx * c.bn), Bs);
      gemm(As, Bs, acc);
    });
    copy(bias.tile(bx * c.bn), b);
    parallel({c.bm, c.bn}, [&](Var i, Var j) { acc(i, j) = gelu(acc(i, j) + b(j)); });
    copy(acc, C.tile(by * c.bm, bx * c.bn));
  };
  return kernel("gemm_bias_gelu", {A, B, bias, C}, grid(ceildiv(N, c.bn), ceildiv(M, c.bm)),
                threads(c.threads), body);
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
                                                  const HostTensor& bias,
                                                  const std::vector<int64_t>& at) {
  const int64_t K = a.shape()[1], N = b.shape()[1];
  std::vector<std::pair<int64_t, double>> want;
  for (int64_t i : at) {
    int64_t m = i / N, n = i % N;
    double v = bias.get(n);
    for (int64_t k = 0; k < K; ++k)
      v += a.get(m * K + k) * b.get(k * N + n);
    want.emplace_back(i, 0.5 * v * (1 + std::tanh(kSqrt2OverPi * (v + 0.044715 * v * v * v))));
  }
  return want;
}

// C rounds once to bf16 (2^-8 relative); the f32 sum and exp add ~K 2^-24 before GELU, whose
// slope is at most ~1.13.
constexpr double kAtol = 3e-3, kRtol = 1.0 / 128;

bool run_cpu() {
  const int64_t M = 77, N = 45, K = 133;
  HostTensor a(bf16, {M, K}), b(bf16, {K, N}), bias(bf16, {N}), c(bf16, {M, N});
  a.fill_random(1);
  b.fill_random(2);
  bias.fill_random(3);
  c.poison();
  interpret(gemm_bias_gelu({64, 64, 32, 2, 128, 0}), {a, b, bias, c});
  std::vector<int64_t> all;
  for (int64_t i = 0; i < M * N; ++i)
    all.push_back(i);
  return check("CPU 77 x 45 x 133", c, reference(a, b, bias, all), kAtol, kRtol);
}

// The kernels --gpu runs, in their GPU config.
std::vector<Kernel> gpu_kernels() {
  return {gemm_bias_gelu({128, 256, 64, 4, 256, 8})};
}

bool run_gpu() {
  const int64_t M = 4096, N = 4096, K = 4096;
  CompiledKernel ck = compile(gpu_kernels()[0]);
  HostTensor a(bf16, {M, K}), b(bf16, {K, N}), bias(bf16, {N});
  a.fill_random(1);
  b.fill_random(2);
  bias.fill_random(3);
  DeviceArray da = DeviceArray::from(a), db = DeviceArray::from(b);
  DeviceArray dbias = DeviceArray::from(bias), dc(bf16, {M, N});
  dc.fill_bytes(0xff);
  std::vector<Arg> args = {da, db, dbias, dc};
  ck.launch(args);
  synchronize();
  std::vector<int64_t> sample = {0, M * N - 1};
  for (int64_t s = 0; s < 254; ++s)
    sample.push_back((s * 2654435761LL) % (M * N));
  bool ok =
      check("GPU 4096^3 (256 samples)", dc.to_host(), reference(a, b, bias, sample), kAtol, kRtol);
  // The epilogue's ~10 flops per output are 0.1 % of the 2K per output of the product.
  report_flops(time(ck, args, {.runs = 20, .flush_l2 = true}), 2.0 * M * N * K);
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
