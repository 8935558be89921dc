// The pilot's CUDA backend hooks (default_backends). Without a GPU (CI): every hook that needs
// one throws StageSkipped with the reason, compile-only still compiles for the target arch and
// reports resources, a pilot records NVRTC-only compile results, and replaying a cuda
// reproducer says what to do instead. On an sm_90a GPU (label gpu): full gemm and attention
// pilots measure every stage and reach a decision.
#include <cstdlib>
#include <filesystem>

#include "PilotTestSupport.h"
#include "pilot/CudaBackend.h"
#include "pilot/Pilot.h"
#include "pilot/Repro.h"
#include "runtime/Nvrtc.h"
#include "tilepilot/runtime.h"

using namespace tp;
using namespace tp::pilot;
using namespace tp::pilot::testing;

namespace {

const ops::Operator& gemm() {
  return ops::find_operator("gemm");
}

ops::Problem gemm_problem() {
  return gemm().parse({{"M", "128"}, {"N", "128"}, {"K", "64"}}, DType::bf16);
}

PilotOptions options(const std::string& dir) {
  PilotOptions o; // default_backends(): the real hooks
  o.out_dir = dir;
  o.progress = ProgressMode::off;
  return o;
}

/// The message of the StageSkipped `f` throws, or a note that it threw none.
std::string skipped(const std::function<void()>& f) {
  try {
    f();
  } catch (const StageSkipped& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("(threw something else: ") + e.what() + ")";
  }
  return "(threw nothing)";
}

} // namespace

TEST(PilotCudaBackend, DefaultBackendsFillTheGpuHooks) {
  Backends b = default_backends();
  EXPECT_TRUE(b.device);
  EXPECT_TRUE(b.check_cuda);
  EXPECT_TRUE(b.compile_only);
  EXPECT_TRUE(b.compile_timing);
  EXPECT_TRUE(b.warm_timing);
  EXPECT_TRUE(b.memory);
  EXPECT_TRUE(b.tune);
  EXPECT_TRUE(b.fallback_test);
}

TEST(PilotCudaBackend, WithoutADriverEveryGpuHookSaysNotRun) {
  if (rt::driver_available()) GTEST_SKIP() << "a CUDA driver is present here";
  Backends b = default_backends();
  ops::Problem p = gemm_problem();
  ops::Config c = gemm().default_config(p, "sm_90a");
  std::vector<std::pair<std::string, std::function<void()>>> hooks = {
      {"check_cuda", [&] { b.check_cuda(gemm(), p, ops::CheckOptions{}); }},
      {"compile_timing", [&] { b.compile_timing(gemm(), p, c, "sm_90a"); }},
      {"warm_timing", [&] { b.warm_timing(gemm(), p, c); }},
      {"memory", [&] { b.memory(gemm(), p, c); }},
      {"tune", [&] { b.tune(gemm(), p, c); }},
      {"fallback_test", [&] { b.fallback_test(gemm(), p); }}};
  for (const auto& [name, call] : hooks) {
    std::string why = skipped(call);
    EXPECT_EQ(why.rfind("no GPU (", 0), 0u) << name << ": " << why;
  }
}

TEST(PilotCudaBackend, BadTuneBudgetInTheEnvironmentIsAUserError) {
  Backends b = default_backends();
  ops::Problem p = gemm_problem();
  ops::Config c = gemm().default_config(p, "sm_90a");
  for (const char* bad : {"abc", "0", "-5", "12s"}) {
    setenv("TILEPILOT_TUNE_BUDGET_S", bad, 1);
    try {
      b.tune(gemm(), p, c);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("TILEPILOT_TUNE_BUDGET_S='" + std::string(bad) + "'"),
                std::string::npos)
          << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << bad << ": not a user error: " << e.what();
    }
  }
  unsetenv("TILEPILOT_TUNE_BUDGET_S");
}

TEST(PilotCudaBackend, CompileOnlyNeedsNoGpu) {
  std::string why;
  if (!rt::nvrtc_available(&why)) GTEST_SKIP() << "no NVRTC here: " << why;
  Backends b = default_backends();
  ops::Problem p = gemm_problem();
  Kernel k = gemm().build(p, gemm().default_config(p, "sm_90a"));
  CompileOnlyResult r = b.compile_only(k, "sm_90a");
  EXPECT_FALSE(r.cubin.empty());
  EXPECT_FALSE(r.cuda_source.empty());
  EXPECT_GT(r.nvrtc_ms, 0);
  EXPECT_GT(r.resources["registers"].get<int>(), 0) << r.nvrtc_log;
  EXPECT_TRUE(r.resources.contains("shared_bytes"));
  EXPECT_TRUE(r.resources.contains("spill_bytes"));
}

TEST(PilotCudaBackend, PilotWithoutGpuRecordsCompileOnlyResults) {
  std::string why;
  if (rt::device_count() > 0) GTEST_SKIP() << "a GPU is present";
  if (!rt::nvrtc_available(&why)) GTEST_SKIP() << "no NVRTC here: " << why;
  std::string dir = scratch_dir();
  PilotResult r = run_pilot(parse_spec(small_gemm_spec(), "small.yaml"), options(dir));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.decision, kUndecided);
  const StageRecord* c = r.stage("compile");
  ASSERT_EQ(c->status, "passed") << c->data.dump(2);
  EXPECT_EQ(c->data["mode"], "compile-only (no device)");
  EXPECT_EQ(c->data["cold_warm"].get<std::string>().rfind("not run: no sm_90a device (", 0), 0u);
  ASSERT_FALSE(c->data["kernels"].empty());
  for (const auto& k : c->data["kernels"]) {
    EXPECT_GT(k["nvrtc_ms"].get<double>(), 0) << k;
    EXPECT_GT(k["resources"]["registers"].get<int>(), 0) << k;
    EXPECT_FALSE(k.contains("cold_ms")) << "no cold compile was measured without a device";
  }
  for (const char* s : {"warm", "memory", "fallback"})
    EXPECT_EQ(r.stage(s)->status.rfind("not run: no sm_90a device (", 0), 0u) << s;
}

TEST(PilotCudaBackend, ReplayingACudaCaseWithoutAGpuSaysUseTheCpu) {
  if (rt::driver_available()) GTEST_SKIP() << "a CUDA driver is present here";
  ReproCase c;
  c.problem = gemm_problem();
  c.backend = "cuda";
  c.config = gemm().default_config(c.problem, "sm_90a");
  c.atol = c.rtol = 2e-2;
  try {
    run_case(c, default_backends());
    FAIL() << "a cuda case ran without a GPU";
  } catch (const UserError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("cannot run here: no GPU ("), std::string::npos) << m;
    EXPECT_NE(m.find("--backend cpu"), std::string::npos) << m;
  }
}

TEST(GpuPilotBackends, GemmPilotMeasuresEveryStageAndDecides) {
  std::string dir = scratch_dir();
  std::string spec = R"(operator: gemm
device: sm_90a
dtypes: [bf16]
shapes:
  representative:
    - {M: 2048, N: 2048, K: 2048, weight: 1.0}
  edge:
    - {M: 7, N: 45, K: 133, layout: nt}
reference: framework
tolerance: {atol: 2e-2, rtol: 2e-2}
objective: {metric: weighted_latency, min_speedup: 0.5}
memory_limit_mb: 512
metrics: [correctness, compile, warm, memory]
fallback: required
seed: 7
)";
  PilotResult r = run_pilot(parse_spec(spec, "gemm.yaml"), options(dir));
  for (const StageRecord& s : r.stages)
    EXPECT_TRUE(s.passed() || s.status.rfind("not run: ", 0) == 0)
        << s.name << ": " << s.status << " " << s.data.dump(2);
  EXPECT_EQ(r.stage("correctness")->data["backend"], "cuda");
  for (const char* s : {"compile", "warm", "memory", "fallback"})
    EXPECT_EQ(r.stage(s)->status, "passed") << s << ": " << r.stage(s)->data.dump(2);
  const auto& k = r.stage("compile")->data["kernels"][0];
  EXPECT_GT(k["cold_ms"].get<double>(), k["warm_ms"].get<double>()) << k;
  EXPECT_GT(k["cold_phases_ms"]["nvrtc"].get<double>(), 0) << k;
  const auto& w = r.stage("warm")->data["cases"][0];
  EXPECT_GT(w["ms_median"].get<double>(), 0) << w;
  EXPECT_EQ(w["ref_name"].get<std::string>().rfind("cuBLASLt ", 0), 0u) << w;
  const auto& m = r.stage("memory")->data["cases"][0];
  EXPECT_GE(m["kernel_peak_mb"].get<double>(), 3 * 2048.0 * 2048 * 2 / (1 << 20)) << m;
  // cuBLASLt's 32 MiB workspace on top of the same arguments.
  EXPECT_GE(m["reference_peak_mb"].get<double>(), 32 + 3 * 2048.0 * 2048 * 2 / (1 << 20)) << m;
  for (const auto& f : r.stage("fallback")->data["cases"]) {
    EXPECT_TRUE(f["passed"].get<bool>()) << f;
    EXPECT_EQ(f["fallback"].get<std::string>().rfind("cuBLASLt ", 0), 0u) << f;
  }
  EXPECT_NE(r.decision, kUndecided) << r.stage("decision")->data.dump(2);
  if (r.decision == kRelease) EXPECT_TRUE(std::filesystem::exists(dir + "/release"));
}

TEST(GpuPilotBackends, AttentionPilotTunesAndMeasures) {
  std::string dir = scratch_dir();
  std::string spec = R"(operator: attention
device: sm_90a
dtypes: [bf16]
shapes:
  representative:
    - {B: 2, H: 8, S: 1024, D: 128, causal: 1, weight: 1.0}
  edge:
    - {B: 1, H: 1, S: 1, D: 128}
    - {B: 3, H: 5, S: 129, D: 64, causal: 1}
reference: framework
tolerance: {atol: 2e-2, rtol: 2e-2}
objective: {metric: weighted_latency, min_speedup: 0.5}
memory_limit_mb: 512
metrics: [correctness, compile, warm, memory, autotune]
fallback: required
seed: 3
)";
  PilotOptions o = options(dir);
  CudaBackendOptions cb;
  cb.tune_budget_seconds = 60; // a bounded search: this checks the plumbing, not the optimum
  add_cuda_backend(o.backends, cb);
  PilotResult r = run_pilot(parse_spec(spec, "attention.yaml"), o);
  for (const char* s : {"correctness", "compile", "warm", "memory", "autotune", "fallback"})
    EXPECT_EQ(r.stage(s)->status, "passed") << s << ": " << r.stage(s)->data.dump(2);
  const auto& t = r.stage("autotune")->data["cases"][0];
  EXPECT_GT(t["trials"].get<int>(), 0) << t;
  EXPECT_GT(t["tuner_best_ms"].get<double>(), 0) << t;
  EXPECT_TRUE(t["adopted"].get<bool>()) << t;
  EXPECT_TRUE(t.contains("warm")) << "an adopted config is re-timed: " << t;
  for (const auto& f : r.stage("fallback")->data["cases"])
    EXPECT_TRUE(f["passed"].get<bool>()) << f;
  EXPECT_NE(r.decision, kUndecided) << r.stage("decision")->data.dump(2);
}
