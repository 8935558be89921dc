// The `tilepilot bench` report from a SideBySide: the DESIGN.md JSON keys, nulls (never zeros)
// for what was not measured, and text that says why a side is missing. The timings here are
// made-up test values; nothing is measured.
#include <gtest/gtest.h>

#include "perf/SideBySideReport.h"

using namespace tp;

namespace {

ops::Problem gemm_problem() {
  return ops::find_operator("gemm").parse({{"M", "4096"}, {"N", "4096"}, {"K", "4096"}},
                                          DType::bf16);
}

perf::SideBySide both_sides() {
  perf::SideBySide s;
  s.arch = "sm_90a";
  s.device = "Test GPU (made-up numbers)";
  s.config = {{"bm", 128}, {"bn", 128}};
  s.flops = 2.0 * 4096 * 4096 * 4096;
  s.ours = rt::summarize({0.20, 0.21, 0.22, 0.23});
  s.ref_name = "cuBLASLt 13.1.0";
  s.ref = rt::summarize({0.25, 0.25, 0.25});
  perf::CompileReport c;
  c.cold_phases_ms = {{"build", 1}, {"passes+codegen", 20}, {"nvrtc", 400}, {"module_load", 5}};
  c.cold_ms = 426;
  c.warm_phases_ms = {{"build", 1}, {"passes+codegen", 20}, {"lookup", 0.1}};
  c.warm_ms = 21.1;
  c.warm_cache_hit = true;
  s.compile = c;
  return s;
}

} // namespace

TEST(SideBySideReport, JsonCarriesTheContractKeys) {
  rt::TimingOptions o;
  nlohmann::json j = perf::to_json(both_sides(), gemm_problem(), o);
  for (const char* k : {"op", "shape", "dtype", "config", "device", "ms_median", "ms_iqr", "tflops",
                        "ref_name", "ref_ms_median", "ref_tflops", "speedup"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["op"], "gemm");
  EXPECT_EQ(j["shape"], gemm_problem().shape_str());
  EXPECT_EQ(j["config"], "bm=128,bn=128");
  EXPECT_NEAR(j["ms_median"].get<double>(), 0.215, 1e-12);
  EXPECT_NEAR(j["speedup"].get<double>(), 0.25 / 0.215, 1e-9);
  EXPECT_NEAR(j["ref_tflops"].get<double>(), 2.0 * 4096 * 4096 * 4096 / 0.25e9, 1e-6);
  EXPECT_EQ(j["runs"], 50);
  EXPECT_EQ(j["compile"]["cold_phases_ms"]["nvrtc"], 400);
  EXPECT_TRUE(j["compile"]["warm_cache_hit"].get<bool>());
  EXPECT_EQ(j["status"], "measured");
  EXPECT_FALSE(j.contains("ref_note"));
}

TEST(SideBySideReport, BytesGiveGbpsAgainstTheCopyMeasuredInTheRun) {
  perf::SideBySide s = both_sides();
  rt::TimingOptions o;
  // Without min_bytes or a measured copy: nulls, and no memory line.
  nlohmann::json j = perf::to_json(s, gemm_problem(), o);
  EXPECT_TRUE(j["gbps"].is_null());
  EXPECT_TRUE(j["copy_gbps"].is_null());
  EXPECT_EQ(perf::to_text(s, gemm_problem(), o).find("memory:"), std::string::npos);
  s.bytes = 3.0 * 4096 * 4096 * 2; // A and B read once, C written once
  s.copy_gbps = 3000;
  j = perf::to_json(s, gemm_problem(), o);
  EXPECT_NEAR(j["gbps"].get<double>(), s.bytes / (0.215 * 1e6), 1e-6);
  EXPECT_NEAR(j["ref_gbps"].get<double>(), s.bytes / (0.25 * 1e6), 1e-6);
  EXPECT_EQ(j["copy_gbps"], 3000);
  EXPECT_EQ(j["bytes"], s.bytes);
  std::string text = perf::to_text(s, gemm_problem(), o);
  // 100.7 MB in 0.215 ms = 468 GB/s, 16 % of the copy; cuBLASLt's 0.25 ms 403 GB/s, 13 %.
  EXPECT_NE(text.find("ours: 0.2150 ms (IQR"), std::string::npos) << text;
  EXPECT_NE(text.find(", 468 GB/s"), std::string::npos) << text;
  EXPECT_NE(text.find("memory: 100.7 MB (inputs read once, outputs written once); "
                      "device-to-device copy 3000 GB/s in this run; ours 16 % of it, "
                      "cuBLASLt 13.1.0 13 %"),
            std::string::npos)
      << text;
}

TEST(SideBySideReport, MissingReferenceIsNullAndExplained) {
  perf::SideBySide s = both_sides();
  s.ref.reset();
  s.ref_name.clear();
  s.ref_note = "not available: the gemm reference (cuBLASLt) cannot run here: test";
  rt::TimingOptions o;
  nlohmann::json j = perf::to_json(s, gemm_problem(), o);
  EXPECT_TRUE(j["ref_ms_median"].is_null());
  EXPECT_TRUE(j["ref_tflops"].is_null());
  EXPECT_TRUE(j["speedup"].is_null());
  EXPECT_EQ(j["ref_note"], s.ref_note);
  std::string text = perf::to_text(s, gemm_problem(), o);
  EXPECT_NE(text.find("reference: not available: the gemm reference"), std::string::npos) << text;
  EXPECT_EQ(text.find("speedup"), std::string::npos) << text;
}

TEST(SideBySideReport, FailedCheckIsNotTimed) {
  perf::SideBySide s = both_sides();
  s.ours.reset();
  s.ref.reset();
  s.compile.reset();
  ops::CheckResult c;
  c.passed = false;
  c.max_abs_err = 3.5;
  c.first_bad = "C[0,0]: got 3.5, want 0";
  s.check = c;
  rt::TimingOptions o;
  nlohmann::json j = perf::to_json(s, gemm_problem(), o);
  EXPECT_EQ(j["status"], "check_failed");
  EXPECT_TRUE(j["ms_median"].is_null());
  EXPECT_FALSE(j["check"]["passed"].get<bool>());
  std::string text = perf::to_text(s, gemm_problem(), o);
  EXPECT_NE(text.find("check: FAIL"), std::string::npos) << text;
  EXPECT_NE(text.find("never timed"), std::string::npos) << text;
}
