// What every lesson shares, so that a lesson file holds only what it teaches: its kernels, its
// fp64 reference, its shapes and its checks. Like the lessons, it uses the public headers alone.
//   check()                   a result against (flat index, fp64 value) pairs, one printed line
//   all(), sample()           the indices a check covers: every one, or a spread for big outputs
//   report_bytes/flops()      the napkin math of a --gpu run: TB/s against the device-to-device
//                             copy bandwidth measured in the run, or TFLOP/s against the peak
//   main()                    the command line: none (CPU interpreter), --gpu, --compile (NVRTC
//                             for sm_90a, no GPU needed), --show (lowered IR and CUDA for
//                             sm_90a, no GPU needed); exits 0 on pass, 1 on a wrong result
//                             or an error, 2 on bad arguments or --gpu without a usable GPU
#pragma once

#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <tilepilot/tilepilot.h>

namespace lesson {

// |got - want| <= atol + rtol |want| at every checked (flat index, value) pair; NaN fails.
inline bool check(const char* what, const tp::HostTensor& got,
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

// 0, 1, ..., n - 1: every element (or row) of a CPU-sized output.
inline std::vector<int64_t> all(int64_t n) {
  std::vector<int64_t> at;
  for (int64_t i = 0; i < n; ++i)
    at.push_back(i);
  return at;
}

// `count` indices below n where checking all of a GPU-sized output in fp64 would take minutes:
// the first, the last, and the rest spread over [0, n) by a multiplicative hash.
inline std::vector<int64_t> sample(int64_t n, int64_t count = 256) {
  std::vector<int64_t> at = {0, n - 1};
  for (int64_t s = 0; s < count - 2; ++s)
    at.push_back((s * 2654435761LL) % n);
  return at;
}

// Napkin math of a memory-bound kernel: bytes read once and written once, against the
// device-to-device copy bandwidth measured in this run.
inline void report_bytes(const tp::TimeResult& t, double bytes) {
  double tbs = bytes / (t.median_ms * 1e-3) / 1e12, copy_tbs = tp::measure_copy_bandwidth() / 1e3;
  std::printf("GPU: %.3f ms (median of %zu, L2 flushed), %.0f MB moved, %.2f TB/s = %.0f %% of "
              "the %.2f TB/s device-to-device copy\n",
              t.median_ms, t.samples_ms.size(), bytes / 1e6, tbs, 100 * tbs / copy_tbs, copy_tbs);
}

// Napkin math of a compute-bound kernel, against the H200's stated bf16 dense peak.
inline void report_flops(const tp::TimeResult& t, double flops) {
  const double peak = 989; // TFLOP/s, H200 SXM bf16 dense tensor cores
  double tf = flops / (t.median_ms * 1e-3) / 1e12;
  std::printf("GPU: %.3f ms (median of %zu, L2 flushed), %.1f GFLOP, %.0f TFLOP/s = %.0f %% of "
              "the %.0f TFLOP/s bf16 peak\n",
              t.median_ms, t.samples_ms.size(), flops / 1e9, tf, 100 * tf / peak, peak);
}

// --compile: lowers the --gpu kernels and compiles them with NVRTC for sm_90a, which needs no
// GPU, and prints what ptxas reports.
inline bool compile_only(const std::vector<tp::Kernel>& kernels) {
  for (const tp::Kernel& k : kernels) {
    tp::CompiledKernel ck = tp::compile(k, {.arch = "sm_90a"});
    tp::Resources r = ck.resources();
    std::printf("sm_90a: %d threads, %d registers, %d spill bytes, %lld + %d bytes of shared "
                "memory%s\n",
                r.threads, r.registers, r.spill_bytes, (long long)r.smem_dynamic, r.smem_static,
                r.wgmma_serialized ? ", wgmma serialized" : "");
  }
  return true;
}

// --show: the lowered IR (layouts, pipeline plan) and the generated CUDA of the --gpu kernels
// for sm_90a, to read what the compiler decided; needs no GPU.
inline bool show(const std::vector<tp::Kernel>& kernels) {
  for (const tp::Kernel& k : kernels) {
    tp::CompiledKernel ck = tp::compile(k, {.arch = "sm_90a"});
    std::printf("// ---- lowered IR\n%s\n// ---- CUDA\n%s\n", ck.lowered().c_str(),
                ck.source().c_str());
  }
  return true;
}

// A lesson's main: `return lesson::main(argc, argv, run_cpu, run_gpu, gpu_kernels);`, where
// gpu_kernels() gives the kernels run_gpu() runs, in their GPU config, for --compile.
inline int main(int argc, char** argv, bool (*run_cpu)(), bool (*run_gpu)(),
                std::vector<tp::Kernel> (*gpu_kernels)()) {
  std::string mode = argc == 2 ? argv[1] : "";
  if (argc > 2 || (argc == 2 && mode != "--gpu" && mode != "--compile" && mode != "--show")) {
    std::fprintf(stderr, "usage: %s [--gpu | --compile | --show]\n", argv[0]);
    return 2;
  }
  try {
    std::string why;
    if (mode == "--gpu" && !tp::gpu_available(&why)) {
      std::fprintf(stderr, "%s: --gpu needs a CUDA GPU, and none can be used here: %s\n", argv[0],
                   why.c_str());
      return 2;
    }
    bool ok = mode == "--gpu"       ? run_gpu()
              : mode == "--compile" ? compile_only(gpu_kernels())
              : mode == "--show"    ? show(gpu_kernels())
                                    : run_cpu();
    return ok ? 0 : 1;
  } catch (const tp::Error& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 1;
  }
}

} // namespace lesson
