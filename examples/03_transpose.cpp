// Lesson 3: a transpose, B[N, M] = A[M, N]^T in bf16. A block reads a b x b tile of A with
// coalesced rows into shared memory, and a `parallel` loop reads it column-wise into a fragment
// that is stored as a tile of B, again with coalesced rows: the shared tile is where the
// transpose happens, so neither global access is strided.
// Teaches: shared memory as a staging buffer, index arithmetic in a parallel loop.
// Run: build/example_03_transpose         CPU interpreter, 77 x 133 with 32 x 32 tiles, exact
//      build/example_03_transpose --gpu   H200: 8192 x 8192, checked exactly, timed, TB/s
//      build/example_03_transpose --compile  no GPU: NVRTC for sm_90a, ptxas resources
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <tilepilot/tilepilot.h>

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
  return check("CPU 77 x 133", b, reference(a), 0, 0); // a permutation: exact
}

// The kernels --gpu runs, in their GPU config.
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
  bool ok = check("GPU 8192 x 8192", db.to_host(), reference(a), 0, 0);
  report_bytes(time(ck, {da, db}, {.runs = 20, .flush_l2 = true}), double(M) * N * 4);
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
