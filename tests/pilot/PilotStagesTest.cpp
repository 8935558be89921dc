// The pilot's stages without a GPU: correctness runs on the interpreter, every device stage says
// `not run: no sm_90a device (...)`, the decision is undecided, no timing number appears
// anywhere, and the three reports are written (report.json with its stable keys).
#include <filesystem>

#include "PilotTestSupport.h"
#include "pilot/Pilot.h"

using namespace tp;
using namespace tp::pilot;
using namespace tp::release;
using namespace tp::pilot::testing;

namespace {

Backends no_gpu() {
  Backends b;
  b.device = [](std::string* why) {
    *why = "libcuda.so.1 not found (test)";
    return std::optional<rt::DeviceInfo>();
  };
  return b;
}

PilotOptions options(const std::string& dir, Backends b) {
  PilotOptions o;
  o.out_dir = dir;
  o.backends = std::move(b);
  o.progress = ProgressMode::off;
  return o;
}

/// True when any key named `key` appears anywhere in `j`.
bool has_key(const nlohmann::json& j, const std::string& key) {
  if (j.is_object())
    for (const auto& [k, v] : j.items())
      if (k == key || has_key(v, key)) return true;
  if (j.is_array())
    for (const auto& v : j)
      if (has_key(v, key)) return true;
  return false;
}

} // namespace

TEST(PilotStages, WithoutGpuDeviceStagesAreNotRunAndDecisionIsUndecided) {
  std::string dir = scratch_dir();
  PilotSpec spec = parse_spec(small_gemm_spec(), "small.yaml");
  PilotResult r = run_pilot(spec, options(dir, no_gpu()));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.decision, kUndecided);
  EXPECT_EQ(r.stage("environment")->status, "passed");
  EXPECT_EQ(r.stage("correctness")->status, "passed");
  const std::string no_device = "not run: no sm_90a device (libcuda.so.1 not found (test))";
  for (const char* s : {"compile", "warm", "memory"})
    EXPECT_EQ(r.stage(s)->status.rfind(no_device, 0), 0u) << s << ": " << r.stage(s)->status;
  EXPECT_EQ(r.stage("model")->status, "not run: model is not in the spec's metrics");
  EXPECT_EQ(r.stage("autotune")->status, "not run: autotune is not in the spec's metrics");
  EXPECT_EQ(r.stage("fallback")->status.rfind(no_device, 0), 0u);
  EXPECT_EQ(r.stage("decision")->status, "passed");
  EXPECT_EQ(r.stage("release")->status.rfind("not run: the decision is undecided", 0), 0u);

  // Correctness: every shape x dtype, each with its seed, backend and blocks recorded.
  const nlohmann::json& corr = r.stage("correctness")->data;
  EXPECT_EQ(corr["backend"], "cpu");
  ASSERT_EQ(corr["cases"].size(), 3u);
  std::set<uint64_t> seeds;
  for (const auto& c : corr["cases"]) {
    EXPECT_TRUE(c["passed"].get<bool>());
    seeds.insert(c["seed"].get<uint64_t>());
    EXPECT_FALSE(c["blocks"].get<std::string>().empty());
  }
  EXPECT_EQ(seeds.size(), 3u) << "every case gets its own seed";

  // Reports: present, JSON parses, stable keys, and no invented measurements.
  for (const char* f : {"report.json", "report.md", "report.html"})
    EXPECT_TRUE(std::filesystem::exists(dir + "/" + f)) << f;
  nlohmann::json rep = read_json(dir + "/report.json");
  for (const char* k : {"format", "spec", "environment", "stages", "decision"})
    EXPECT_TRUE(rep.contains(k)) << k;
  EXPECT_EQ(rep["decision"]["decision"], "undecided");
  EXPECT_EQ(rep["stages"].size(), 10u);
  for (const char* k : {"ms_median", "ref_ms_median", "cold_ms", "warm_ms", "nvrtc_ms",
                        "kernel_peak_mb", "speedup", "weighted_speedup", "baseline_ms"})
    EXPECT_FALSE(has_key(rep, k)) << "report has an unmeasured " << k;
  EXPECT_EQ(rep["decision"]["objective"], "not measured");
  std::string md = read_text(dir + "/report.md");
  EXPECT_NE(md.find("| max_abs_err |"), std::string::npos);
  EXPECT_NE(md.find("Status: " + no_device), std::string::npos);
  std::string html = read_text(dir + "/report.html");
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("Latency per shape vs the reference"), std::string::npos);
  EXPECT_NE(html.find("not run: no sm_90a device"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir + "/release"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/keep-framework.md"));
}

TEST(PilotStages, LargeShapesAreSampledAndSaySo) {
  std::string dir = scratch_dir();
  std::string text = small_gemm_spec();
  text.replace(text.find("{M: 96, N: 64, K: 32"), 20, "{M: 1024, N: 1024, K: 512");
  PilotOptions o = options(dir, no_gpu());
  o.cpu_flop_budget = 2e7;
  PilotResult r = run_pilot(parse_spec(text, "big.yaml"), o);
  const auto& c = r.stage("correctness")->data["cases"][1];
  EXPECT_TRUE(c["passed"].get<bool>());
  EXPECT_LT(c["blocks_checked"].get<int>(), c["blocks_total"].get<int>());
  EXPECT_EQ(c["blocks"].get<std::string>().rfind("sampled ", 0), 0u) << c["blocks"];
}

TEST(PilotStages, HookThatCannotRunHereSaysWhy) {
  std::string dir = scratch_dir();
  Backends b = FakeGpu{}.backends();
  b.memory = [](const ops::Operator&, const ops::Problem&, const ops::Config&) -> MemoryUsage {
    throw StageSkipped("cuMemGetInfo unavailable (test)");
  };
  PilotResult r = run_pilot(parse_spec(small_gemm_spec(), "s.yaml"), options(dir, b));
  EXPECT_EQ(r.stage("memory")->status, "not run: cuMemGetInfo unavailable (test)");
  EXPECT_EQ(r.decision, kUndecided);
}

TEST(PilotStages, MissingHookOnTheDeviceNamesTheHook) {
  std::string dir = scratch_dir();
  Backends b = FakeGpu{}.backends();
  b.warm_timing = nullptr;
  PilotResult r = run_pilot(parse_spec(small_gemm_spec(), "s.yaml"), options(dir, b));
  EXPECT_EQ(r.stage("warm")->status,
            "not run: this build has no warm_timing backend (Backends::warm_timing)");
  EXPECT_EQ(r.decision, kUndecided);
}
