// The decision and its artifacts, driven by fake GPU hooks (FakeGpu, tests only): a fast kernel
// is released (and the release folder reads back through load_release, with dispatch reasons),
// a slow one or one over the memory limit keeps the framework operator with the numbers that
// say why.
#include <filesystem>

#include "PilotTestSupport.h"
#include "pilot/Pilot.h"
#include "release/ReleaseManifest.h"

using namespace tp;
using namespace tp::pilot;
using namespace tp::release;
using namespace tp::pilot::testing;

namespace {

PilotResult run_with(const FakeGpu& gpu, const std::string& dir, const std::string& extra = "") {
  PilotOptions o;
  o.out_dir = dir;
  o.backends = gpu.backends();
  o.progress = ProgressMode::off;
  return run_pilot(parse_spec(small_gemm_spec(extra), "fake.yaml"), o);
}

ops::Problem gemm(int64_t M, int64_t N, int64_t K, const std::string& layout = "nn",
                  DType t = DType::bf16) {
  return ops::find_operator("gemm").parse({{"M", std::to_string(M)},
                                           {"N", std::to_string(N)},
                                           {"K", std::to_string(K)},
                                           {"layout", layout}},
                                          t);
}

} // namespace

TEST(PilotDecision, FastKernelIsReleasedAndTheReleaseReadsBack) {
  std::string dir = scratch_dir();
  PilotResult r = run_with(FakeGpu{0.5, 100}, dir);
  ASSERT_EQ(r.decision, kRelease) << r.report["decision"].dump(2);
  EXPECT_EQ(r.exit_code, 0);
  for (const char* s : {"correctness", "compile", "warm", "memory", "fallback", "release"})
    EXPECT_EQ(r.stage(s)->status, "passed") << s;
  EXPECT_NEAR(r.report["decision"]["objective"]["weighted_speedup"].get<double>(), 2.0, 1e-9);
  EXPECT_EQ(r.stage("correctness")->data["backend"], "cuda");

  release::Release rel = release::load_release(dir + "/release");
  EXPECT_EQ(rel.op, "gemm");
  EXPECT_EQ(rel.device, "sm_90a");
  EXPECT_EQ(rel.pinned.size(), 3u);
  EXPECT_EQ(rel.matrix.size(), 3u);
  EXPECT_EQ(rel.fallback, "FakeBLAS");
  EXPECT_FALSE(rel.fallback_reasons.empty());
  EXPECT_TRUE(rel.manifest["files"].contains("test_matrix.json"));
  EXPECT_TRUE(rel.manifest["spec"].is_object());
  EXPECT_TRUE(rel.manifest["environment"].is_object());

  std::string why;
  const PinnedEntry* e = rel.find("sm_90a", gemm(7, 45, 133, "nt"), &why);
  ASSERT_NE(e, nullptr) << why;
  EXPECT_EQ(e->config.at("bm"), 64); // the decode default: one block row of 64
  ASSERT_FALSE(e->cubin_file.empty());
  EXPECT_EQ(release::read_text(dir + "/release/" + e->cubin_file),
            std::string("FAKECUBIN\0\x01\x02", 12));
  EXPECT_EQ(rel.find("sm_80", gemm(64, 64, 64), &why), nullptr);
  EXPECT_EQ(why, "device sm_80 is not the released sm_90a");
  EXPECT_EQ(rel.find("sm_90a", gemm(64, 64, 64, "nn", DType::f16), &why), nullptr);
  EXPECT_EQ(why, "dtype f16 is not in the tested matrix");
  EXPECT_EQ(rel.find("sm_90a", gemm(65, 64, 64), &why), nullptr);
  EXPECT_EQ(why, "shape K=64,M=65,N=64,layout=nn is not in the tested matrix");

  // A modified release is refused, naming the file.
  std::ofstream(dir + "/release/pinned.json", std::ios::app) << " ";
  try {
    release::load_release(dir + "/release");
    FAIL() << "a modified release must not load";
  } catch (const UserError& x) {
    EXPECT_NE(std::string(x.what()).find("pinned.json: content hash"), std::string::npos)
        << x.what();
  }
}

/// The small gemm spec with objective.route per_shape.
std::string per_shape_spec() {
  std::string s = small_gemm_spec();
  const std::string obj = "min_speedup: 1.1}";
  return s.replace(s.find(obj), obj.size(), "min_speedup: 1.1, route: per_shape}");
}

PilotResult run_per_shape(const FakeGpu& gpu, const std::string& dir) {
  PilotOptions o;
  o.out_dir = dir;
  o.backends = gpu.backends();
  o.progress = ProgressMode::off;
  return run_pilot(parse_spec(per_shape_spec(), "fake.yaml"), o);
}

TEST(PilotDecision, PerShapeRouteReleasesTheShapesTheKernelWinsAndRoutesTheRest) {
  std::string dir = scratch_dir();
  FakeGpu gpu;
  gpu.speed_for = [](const ops::Problem& p) { return p.at("M") == 64 ? 0.5 : 1.25; };
  PilotResult r = run_per_shape(gpu, dir);
  ASSERT_EQ(r.decision, kRelease) << r.report["decision"].dump(2);
  const nlohmann::json& obj = r.report["decision"]["objective"];
  // rep0 (weight 0.75) at 2x, rep1 served by the framework: 1 / (0.75 / 2 + 0.25) = 1.6.
  EXPECT_NEAR(obj["weighted_speedup"].get<double>(), 1.6, 1e-3) << obj;
  EXPECT_NEAR(obj["kernel_weighted_speedup"].get<double>(), 1 / (0.375 + 0.3125), 1e-3) << obj;
  const nlohmann::json& routes = r.report["decision"]["routes"];
  ASSERT_EQ(routes.size(), 3u);
  EXPECT_EQ(routes[0]["route"], "kernel");
  EXPECT_EQ(routes[1]["route"], "framework");
  EXPECT_EQ(routes[2]["route"], "framework");

  release::Release rel = release::load_release(dir + "/release");
  EXPECT_EQ(rel.pinned.size(), 1u);
  EXPECT_EQ(rel.matrix.size(), 3u); // every case was tested, whichever serves it
  ASSERT_EQ(rel.framework_routed.size(), 2u);
  EXPECT_NEAR(rel.framework_routed[0].kernel_speedup, 0.8, 1e-9);
  std::string why;
  EXPECT_NE(rel.find("sm_90a", gemm(64, 64, 64), &why), nullptr) << why;
  EXPECT_EQ(rel.find("sm_90a", gemm(96, 64, 32), &why), nullptr);
  EXPECT_EQ(why, "the pilot measured FakeBLAS faster at shape K=32,M=96,N=64,layout=nn (the "
                 "kernel ran at 0.800x)");
  std::string md = release::read_text(dir + "/report.md");
  EXPECT_NE(md.find("served by"), std::string::npos);
}

TEST(PilotDecision, PerShapeRouteWithTheFrameworkFasterEverywhereKeepsIt) {
  std::string dir = scratch_dir();
  PilotResult r = run_per_shape(FakeGpu{1.25, 100}, dir);
  ASSERT_EQ(r.decision, kKeepFramework);
  // The routed mix is the framework itself: 1.0, which misses 1.1; and nothing routes to us.
  EXPECT_NEAR(r.report["decision"]["objective"]["weighted_speedup"].get<double>(), 1.0, 1e-9);
  const nlohmann::json& reasons = r.report["decision"]["reasons"];
  ASSERT_EQ(reasons.size(), 2u) << reasons;
  EXPECT_NE(reasons[0].get<std::string>().find("FakeBLAS) is faster at every timed shape (3)"),
            std::string::npos)
      << reasons;
}

TEST(PilotDecision, PerShapeRouteWithTheKernelFasterOnlyAtEdgeShapesKeepsTheFramework) {
  std::string dir = scratch_dir();
  FakeGpu gpu;
  gpu.speed_for = [](const ops::Problem& p) { return p.at("M") == 7 ? 0.5 : 1.25; };
  PilotResult r = run_per_shape(gpu, dir);
  ASSERT_EQ(r.decision, kKeepFramework);
  const nlohmann::json& reasons = r.report["decision"]["reasons"];
  ASSERT_FALSE(reasons.empty());
  EXPECT_NE(reasons[0].get<std::string>().find("faster only at edge shapes (edge bf16 K=133"),
            std::string::npos)
      << reasons;
}

TEST(PilotDecision, SlowKernelKeepsTheFrameworkOperatorWithTheNumbers) {
  std::string dir = scratch_dir();
  PilotResult r = run_with(FakeGpu{1.25, 100}, dir);
  ASSERT_EQ(r.decision, kKeepFramework);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(dir + "/release"));
  nlohmann::json k = read_json(dir + "/keep-framework.json");
  EXPECT_NEAR(k["objective"]["weighted_speedup"].get<double>(), 0.8, 1e-9);
  ASSERT_FALSE(k["reasons"].empty());
  EXPECT_EQ(k["reasons"][0].get<std::string>().rfind("objective missed: weighted speedup 0.8", 0),
            0u)
      << k["reasons"];
  EXPECT_TRUE(k["measured"].contains("warm"));
  std::string md = release::read_text(dir + "/keep-framework.md");
  EXPECT_NE(md.find("objective missed"), std::string::npos);
}

TEST(PilotDecision, MemoryOverTheLimitKeepsTheFrameworkOperator) {
  std::string dir = scratch_dir();
  PilotResult r = run_with(FakeGpu{0.5, 1000}, dir);
  EXPECT_EQ(r.decision, kKeepFramework);
  EXPECT_EQ(r.stage("memory")->status, "failed");
  EXPECT_EQ(r.exit_code, 1);
  std::string reason = r.report["decision"]["reasons"][0];
  EXPECT_NE(reason.find("memory failed (limit 512 MB)"), std::string::npos) << reason;
  EXPECT_NE(reason.find("peaks at 1000 MB"), std::string::npos) << reason;
}

TEST(PilotDecision, RequiredFallbackThatWasNotTestedLeavesItUndecided) {
  std::string dir = scratch_dir();
  FakeGpu gpu{0.5, 100};
  PilotOptions o;
  o.out_dir = dir;
  o.backends = gpu.backends();
  o.backends.fallback_test = nullptr;
  o.progress = ProgressMode::off;
  PilotResult r = run_pilot(parse_spec(small_gemm_spec(), "fake.yaml"), o);
  EXPECT_EQ(r.decision, kUndecided);
  EXPECT_EQ(r.report["decision"]["reasons"][0],
            "fallback: not run: this build has no fallback_test backend (Backends::fallback_test)");
}

TEST(PilotDecision, TunedConfigIsAdoptedOnlyAfterItPassesTheCheck) {
  std::string dir = scratch_dir();
  FakeGpu gpu{0.5, 100};
  PilotOptions o;
  o.out_dir = dir;
  o.backends = gpu.backends();
  o.backends.tune = [](const ops::Operator&, const ops::Problem&, const ops::Config& start) {
    ops::Config c = start;
    c["stages"] = 3;
    return TuneResult{c, 0.001, 17};
  };
  o.progress = ProgressMode::off;
  std::string text = small_gemm_spec();
  text.replace(text.find("memory]"), 7, "memory, autotune]");
  PilotResult r = run_pilot(parse_spec(text, "tune.yaml"), o);
  EXPECT_EQ(r.stage("autotune")->status, "passed");
  EXPECT_EQ(r.decision, kRelease);
  release::Release rel = release::load_release(dir + "/release");
  std::string why;
  const PinnedEntry* e = rel.find("sm_90a", gemm(64, 64, 64), &why);
  ASSERT_NE(e, nullptr) << why;
  EXPECT_EQ(e->config.at("stages"), 3) << "the tuned config ships";
  const PinnedEntry* edge = rel.find("sm_90a", gemm(7, 45, 133, "nt"), &why);
  ASSERT_NE(edge, nullptr) << why;
  EXPECT_EQ(edge->config.at("stages"), 8) << "edge shapes keep the default (M <= 64: 8 stages)";
}

TEST(PilotDecision, IncompleteTimingsLeaveItUndecided) {
  std::string dir = scratch_dir();
  PilotOptions o;
  o.out_dir = dir;
  o.backends = FakeGpu{0.5, 100}.backends();
  o.backends.warm_timing = [](const ops::Operator&, const ops::Problem&, const ops::Config&) {
    return WarmTiming{}; // a hook that measured nothing
  };
  o.progress = ProgressMode::off;
  PilotResult r = run_pilot(parse_spec(small_gemm_spec(), "fake.yaml"), o);
  EXPECT_EQ(r.decision, kUndecided);
  EXPECT_EQ(r.report["decision"]["objective"], "not measured");
  EXPECT_EQ(r.report["decision"]["reasons"][0],
            "objective: not measured (a representative shape has no timing)");
}
