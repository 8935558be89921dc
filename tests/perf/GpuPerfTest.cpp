// GPU measurements (label gpu; need an sm_90a device, cuBLASLt and, for the cuDNN cases, cuDNN):
// side-by-side timing of ours and the reference, compile timing by phase, peak memory of both
// paths, and the fallback checks (cuBLASLt, cuDNN, and the unfused attention stand-in).
#include <gtest/gtest.h>

#include <iostream>

#include "ops/CudaCheck.h"
#include "ops/vendor/CudnnAttention.h"
#include "perf/CompileTiming.h"
#include "perf/FallbackCheck.h"
#include "perf/OursKernel.h"
#include "perf/PeakMemory.h"
#include "perf/SideBySide.h"
#include "perf/SideBySideReport.h"

using namespace tp;

namespace {

ops::Problem gemm_problem(int64_t M, int64_t N, int64_t K) {
  return ops::find_operator("gemm").parse(
      {{"M", std::to_string(M)}, {"N", std::to_string(N)}, {"K", std::to_string(K)}}, DType::bf16);
}

ops::Problem attention_problem(const std::map<std::string, std::string>& kv) {
  return ops::find_operator("attention").parse(kv, DType::bf16);
}

ops::Config default_config(const ops::Problem& p) {
  return ops::find_operator(p.op).default_config(p, ops::device_arch());
}

} // namespace

TEST(GpuPerf, GemmSideBySideTimesBothAfterCheckingOurs) {
  ops::Problem p = gemm_problem(2048, 2048, 2048);
  const ops::Operator& op = ops::find_operator("gemm");
  perf::SideBySideOptions o;
  o.timing.runs = 20;
  o.timing.warmup = 3;
  perf::SideBySide s = perf::time_side_by_side(op, p, default_config(p), o);
  std::cout << perf::to_text(s, p, o.timing);
  ASSERT_TRUE(s.check);
  EXPECT_TRUE(s.check->passed) << s.check->first_bad;
  ASSERT_TRUE(s.ours);
  ASSERT_TRUE(s.ref) << s.ref_note;
  EXPECT_EQ(s.ref_name.rfind("cuBLASLt ", 0), 0u) << s.ref_name;
  EXPECT_EQ(s.ours->samples_ms.size(), 20u);
  // 17.2 GFLOP: between 1 us (impossible) and 50 ms (hopelessly slow) on an H200.
  EXPECT_GT(s.ours->median_ms, 0.001);
  EXPECT_LT(s.ours->median_ms, 50);
  EXPECT_GT(s.ref->median_ms, 0.001);
  ASSERT_TRUE(s.speedup());
  EXPECT_NEAR(*s.speedup(), s.ref->median_ms / s.ours->median_ms, 1e-12);
  nlohmann::json j = perf::to_json(s, p, o.timing);
  EXPECT_EQ(j["status"], "measured");
  EXPECT_GT(j["tflops"].get<double>(), 0);
}

TEST(GpuPerf, ColdCompileRunsNvrtcAndWarmIsACacheHit) {
  ops::Problem p = gemm_problem(512, 512, 512);
  const ops::Operator& op = ops::find_operator("gemm");
  ops::DeviceArgs dev = perf::upload_args(op, p, 1);
  perf::CompileReport r =
      perf::measure_compile(op, p, default_config(p), ops::device_arch(), dev.tensors);
  ASSERT_EQ(r.cold_phases_ms.size(), 4u);
  EXPECT_EQ(r.cold_phases_ms[2].first, "nvrtc");
  EXPECT_GT(r.cold_phases_ms[2].second, 1.0) << "NVRTC takes more than a millisecond";
  double sum = 0;
  for (const auto& [_, ms] : r.cold_phases_ms)
    sum += ms;
  EXPECT_NEAR(r.cold_ms, sum, 1e-9);
  EXPECT_TRUE(r.warm_cache_hit);
  EXPECT_LT(r.warm_ms, r.cold_ms);
}

TEST(GpuPerf, PeakMemoryCountsArgumentsAndTheVendorWorkspace) {
  ops::Problem p = gemm_problem(1024, 1024, 1024);
  const ops::Operator& op = ops::find_operator("gemm");
  perf::PeakMemory m = perf::measure_peak_memory(op, p, default_config(p));
  const uint64_t args = 3ull * 1024 * 1024 * 2; // A, B, C in bf16
  EXPECT_GE(m.kernel.counted_peak_bytes, args);
  EXPECT_LT(m.kernel.counted_peak_bytes, args + (1u << 20)) << "ours allocates no workspace";
  // cuBLASLt's 32 MiB workspace is a DeviceBuffer: counted exactly.
  EXPECT_GE(m.reference.counted_peak_bytes, args + (32ull << 20));
  // The uncounted part (module code, library internals; cuMemGetInfo, 2 MiB pages) is small.
  EXPECT_LT(m.kernel.other_bytes, 64ull << 20);
  EXPECT_GE(m.reference.peak_mb(), double(m.reference.counted_peak_bytes) / (1 << 20));
  EXPECT_EQ(m.reference_name.rfind("cuBLASLt ", 0), 0u);
}

TEST(GpuPerf, CublasLtFallbackMatchesTheFp32Reference) {
  ops::Problem p = gemm_problem(257, 129, 1000);
  perf::FallbackCheck f = perf::check_fallback(ops::find_operator("gemm"), p);
  EXPECT_TRUE(f.passed) << f.first_bad << " max_abs_err " << f.max_abs_err;
  EXPECT_EQ(f.against, "fp32 GPU reference");
  EXPECT_EQ(f.checked, 257 * 129);
  EXPECT_TRUE(f.note.empty());
}

TEST(GpuPerf, CudnnFallbackMatchesTheFp32Reference) {
  std::string why;
  if (!ops::cudnn_attention_available(&why)) GTEST_SKIP() << "no cuDNN attention: " << why;
  ops::Problem p = attention_problem(
      {{"B", "2"}, {"H", "4"}, {"Hkv", "2"}, {"S", "200"}, {"D", "128"}, {"causal", "1"}});
  perf::FallbackCheck f = perf::check_fallback(ops::find_operator("attention"), p);
  EXPECT_TRUE(f.passed) << f.first_bad << " max_abs_err " << f.max_abs_err;
  EXPECT_EQ(f.name.rfind("cuDNN ", 0), 0u) << f.name << " " << f.note;
  EXPECT_EQ(f.checked, 2 * 4 * 200 * 128);
}

TEST(GpuPerf, UnfusedAttentionFallbackIsCheckedAgainstFp64AndSaysSo) {
  ops::Problem p = attention_problem(
      {{"B", "2"}, {"H", "3"}, {"S", "77"}, {"Skv", "100"}, {"D", "64"}, {"lens", "100:37"}});
  perf::FallbackCheck f =
      perf::check_fallback(ops::find_operator("attention"), p, 5, /*allow_vendor=*/false);
  EXPECT_TRUE(f.passed) << f.first_bad << " max_abs_err " << f.max_abs_err;
  EXPECT_EQ(f.name, "unfused fp32 GPU reference");
  EXPECT_NE(f.note.find("cuDNN"), std::string::npos) << f.note;
  EXPECT_EQ(f.against, "fp64 CPU reference (sampled blocks)");
  EXPECT_GT(f.checked, 0);
}

TEST(GpuPerf, AttentionSideBySideNamesItsReference) {
  ops::Problem p = attention_problem({{"B", "2"}, {"H", "8"}, {"S", "1024"}, {"D", "128"}});
  perf::SideBySideOptions o;
  o.timing.runs = 10;
  o.timing.warmup = 2;
  perf::SideBySide s =
      perf::time_side_by_side(ops::find_operator("attention"), p, default_config(p), o);
  std::cout << perf::to_text(s, p, o.timing);
  ASSERT_TRUE(s.check);
  EXPECT_TRUE(s.check->passed) << s.check->first_bad;
  ASSERT_TRUE(s.ours);
  ASSERT_TRUE(s.ref);
  // cuDNN where it runs; otherwise the unfused reference, and the note says why.
  if (s.ref_name.rfind("cuDNN ", 0) != 0) {
    EXPECT_EQ(s.ref_name, "unfused fp32 GPU reference");
    EXPECT_NE(s.ref_note.find("cuDNN"), std::string::npos);
  }
}
