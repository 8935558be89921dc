// Lesson 11: a GEMM with int4 weights dequantized on the fly, C = A dequant(W). A [M, K] and C
// [M, N] are bf16. W holds K x N 4-bit codes, 8 per i32 word along K (word [r, n] holds rows
// 8r..8r+7 of column n, row 8r+i in bits 4i..4i+3), with one bf16 scale per column and group
// of `group` rows: w[k, n] = (code - 8) * scale[k / group, n]. Each K step reads the packed
// words and copies the scale row into a fragment, unpacks them into the shared B tile, then runs
// the tensor-core gemm on bf16 as in lesson 7: the weights move at a quarter of bf16's bytes.
// Teaches: integer arithmetic on tiles, writing a shared tile in a parallel loop, a C++ loop
// that unrolls at build time. K must be a multiple of `group`, `group` of the K step.
// Run: build/example_11_int4_gemm         CPU interpreter, 77 x 45 x 160, groups of 32
//      build/example_11_int4_gemm --gpu   H200: 4096^3, groups of 128, sampled check, TFLOP/s
//      build/example_11_int4_gemm --compile  no GPU: NVRTC for sm_90a, ptxas resources
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <tilepilot/tilepilot.h>

using namespace tp;

namespace {

struct GemmConfig {
  int64_t bm, bn, bk;
  int stages, threads;
};

// Code i (0..7) of a word. The language has no bit operators yet, so the word's bits are read
// with integer / and %, which truncate toward zero: a negative word (code 7 >= 8) is first
// lifted by 2^31 (in two steps of 2^30 that cannot overflow), which leaves bits 0..30 as they
// are, and the lost top bit is added back to code 7.
// later: (w >> 4 * i) & 0xf, or the packed int4 dtype's unpack.
Expr code(const Expr& w, int i) {
  Expr lift = select(w < 0, 1 << 30, 0), u = (w + lift) + lift; // bits 0..30 of w, >= 0
  if (i < 7) return (u / (1 << (4 * i))) % 16;
  return u / (1 << 28) + select(w < 0, 8, 0);
}

Kernel int4_gemm(const GemmConfig& c, int64_t group) {
  Dim M("M"), N("N"), K("K"), KW("KW"), KG("KG");
  Tensor A("A", {M, K}, bf16), W("W", {KW, N}, i32), S("scales", {KG, N}, bf16);
  Tensor C("C", {M, N}, bf16);
  auto body = [&](Var bx, Var by) {
    Tile As = alloc_shared({c.bm, c.bk}, bf16), Bs = alloc_shared({c.bk, c.bn}, bf16);
    Tile s = alloc_fragment({c.bn}, f32);
    Tile acc = alloc_fragment({c.bm, c.bn}, f32);
    clear(acc);
    pipelined(ceildiv(K, c.bk), c.stages, [&](Var k) {
      copy(A.tile(by * c.bm, k * c.bk), As);
      copy(S.tile(k * c.bk / group, bx * c.bn), s); // one scale row: the step lies in a group
      parallel({c.bk / 8, c.bn}, [&](Var r, Var j) {
        // Columns past N read column N - 1: finite codes that meet a zero scale (s reads 0
        // there) and land in columns of C that are never stored.
        // later: copy the words into an i32 fragment; today the CUDA copy's edge guard goes
        // through f32 (src/passes/LowerCopy.cpp), which rounds words above 2^24.
        Expr w = W(k * (c.bk / 8) + r, min(bx * c.bn + j, N - 1));
        for (int i = 0; i < 8; ++i)
          Bs(r * 8 + i, j) = cast(f32, code(w, i) - 8) * s(j);
      });
      gemm(As, Bs, acc);
    });
    copy(acc, C.tile(by * c.bm, bx * c.bn));
  };
  return kernel("int4_gemm_g" + std::to_string(group), {A, W, S, C},
                grid(ceildiv(N, c.bn), ceildiv(M, c.bm)), threads(c.threads), body);
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

// Random codes packed as the kernel reads them, and the weights they stand for in fp64.
struct Int4Weights {
  HostTensor words, scales;
  std::vector<double> dense; // [K, N]
};

Int4Weights make_weights(int64_t K, int64_t N, int64_t group, uint64_t seed) {
  Int4Weights q{HostTensor(i32, {K / 8, N}), HostTensor(bf16, {K / group, N}), {}};
  q.scales.fill_random(seed, 0.01, 0.1);
  HostTensor codes(i32, {K, N});
  codes.fill_random(seed + 1, 0, 15.999); // integers 0..15
  q.dense.resize(K * N);
  for (int64_t r = 0; r < K / 8; ++r)
    for (int64_t n = 0; n < N; ++n) {
      uint32_t word = 0;
      for (int i = 0; i < 8; ++i) {
        int64_t k = 8 * r + i, c = static_cast<int64_t>(codes.get(k * N + n)) & 15;
        word |= uint32_t(c) << (4 * i);
        // Stored into the bf16 B tile, code x scale rounds to bf16, as here.
        q.dense[k * N + n] = round_to(bf16, double(c - 8) * q.scales.get(k / group * N + n));
      }
      q.words.set(r * N + n, double(int32_t(word)));
    }
  return q;
}

std::vector<std::pair<int64_t, double>> reference(const HostTensor& a, const Int4Weights& q,
                                                  int64_t N, const std::vector<int64_t>& at) {
  const int64_t K = a.shape()[1];
  std::vector<std::pair<int64_t, double>> want;
  for (int64_t i : at) {
    int64_t m = i / N, n = i % N;
    double s = 0;
    for (int64_t k = 0; k < K; ++k)
      s += a.get(m * K + k) * q.dense[k * N + n];
    want.emplace_back(i, s);
  }
  return want;
}

// C rounds once to bf16 (2^-8 relative); f32 accumulation of K products adds ~K 2^-24.
constexpr double kAtol = 2e-3, kRtol = 1.0 / 128;

bool run_cpu() {
  const int64_t M = 77, N = 45, K = 160, group = 32;
  HostTensor a(bf16, {M, K}), c(bf16, {M, N});
  a.fill_random(1);
  Int4Weights q = make_weights(K, N, group, 2);
  c.poison();
  interpret(int4_gemm({64, 32, 32, 2, 128}, group), {a, q.words, q.scales, c});
  std::vector<int64_t> all;
  for (int64_t i = 0; i < M * N; ++i)
    all.push_back(i);
  return check("CPU 77 x 45 x 160", c, reference(a, q, N, all), kAtol, kRtol);
}

constexpr int64_t kGpuGroup = 128;

// The kernels --gpu runs, in their GPU config.
std::vector<Kernel> gpu_kernels() {
  return {int4_gemm({128, 256, 64, 3, 256}, kGpuGroup)};
}

bool run_gpu() {
  const int64_t M = 4096, N = 4096, K = 4096, group = kGpuGroup;
  CompiledKernel ck = compile(gpu_kernels()[0]);
  HostTensor a(bf16, {M, K});
  a.fill_random(1);
  Int4Weights q = make_weights(K, N, group, 2);
  DeviceArray da = DeviceArray::from(a), dw = DeviceArray::from(q.words);
  DeviceArray ds = DeviceArray::from(q.scales), dc(bf16, {M, N});
  dc.fill_bytes(0xff);
  std::vector<Arg> args = {da, dw, ds, dc};
  ck.launch(args);
  synchronize();
  std::vector<int64_t> sample = {0, M * N - 1};
  for (int64_t s = 0; s < 254; ++s)
    sample.push_back((s * 2654435761LL) % (M * N));
  bool ok =
      check("GPU 4096^3 (256 samples)", dc.to_host(), reference(a, q, N, sample), kAtol, kRtol);
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
