// `tilepilot tune` end to end through the binary: --dry-run prints the pruned space and exits 0;
// without a GPU the command says "not run: measurement needs an sm_90a GPU (...)" and exits 2;
// bad input names what to fix.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "RunCli.h"
#include "autotune/Policy.h"
#include "runtime/Nvrtc.h"
#include "tilepilot/runtime.h"

namespace {

using tp::testing::CliResult;

CliResult run(const std::string& args) {
  return tp::testing::run_cli(args);
}

// A pilot spec with two dtypes, two representative shapes and one edge shape, in a fresh file.
std::string write_spec(const std::string& name) {
  auto path = std::filesystem::temp_directory_path() / ("tilepilot-tune-" + name + ".yaml");
  std::ofstream(path) << R"(operator: gemm
device: sm_90a
dtypes: [bf16, f16]
shapes:
  representative:
    - {M: 256, N: 256, K: 256, weight: 0.75}
    - {M: 128, N: 384, K: 128, weight: 0.25}
  edge:
    - {M: 7, N: 45, K: 133, layout: nt}
reference: framework
tolerance: {atol: 2e-2, rtol: 2e-2}
objective: {metric: weighted_latency, min_speedup: 1.0}
memory_limit_mb: 512
metrics: [correctness, warm, memory]
fallback: required
seed: 7
)";
  return path.string();
}

} // namespace

TEST(TuneCommand, DryRunPrintsThePrunedSpace) {
  CliResult r = run("tune gemm --shape M=4096,N=4096,K=4096 --arch sm_90a --dry-run");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("space: 11520 configs, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pruned before compiling (divisibility "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("shared memory per block, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("search order (first 10 of "), std::string::npos) << r.out;
}

TEST(TuneCommand, DryRunJsonCountsAddUp) {
  CliResult r = run("tune attention --shape B=2,H=8,S=1024,D=128 --arch sm_80 --space 'stages=1|2' "
                    "--dry-run --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["status"], "dry_run");
  EXPECT_EQ(j["arch"], "sm_80");
  const auto& s = j["space"];
  // bm {64, 128, 192} x bn {32, 64, 128} x stages {1, 2} x threads {128, 256, 384}; on sm_80
  // persistent and pingpong are fixed at 0.
  EXPECT_EQ(s["total"], 3 * 3 * 2 * 3);
  EXPECT_EQ(s["kept"].get<int>() + s["pruned"].get<int>(), s["total"].get<int>());
  EXPECT_EQ(s["kept_configs"].size(), s["kept"].get<size_t>());
  for (const auto& p : s["pruned_configs"])
    EXPECT_FALSE(p["reason"].get<std::string>().empty());
}

TEST(TuneCommand, WithoutAGpuSaysNotRunAndExits2) {
  if (tp::rt::device_count() > 0) GTEST_SKIP() << "a GPU is present; this checks the no-GPU path";
  // Without a GPU, --compile-check compiles every kept candidate with NVRTC (the CUDA hooks
  // are registered): a narrow --space keeps that to a few compiles.
  const std::string space =
      " --compile-check --space 'bm=128,bn=128|256,stages=3,threads=256,swizzle=0'";
  CliResult r = run("tune gemm --shape M=256,N=256,K=256" + space);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("space: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not run: measurement needs an sm_90a GPU ("), std::string::npos) << r.out;
  CliResult j = run("tune gemm --shape M=256,N=256,K=256 --json" + space);
  EXPECT_EQ(j.rc, 2);
  nlohmann::json o = nlohmann::json::parse(j.out);
  EXPECT_EQ(o["status"], "not_run");
  EXPECT_EQ(o["reason"].get<std::string>().find("not run: measurement needs an sm_90a GPU ("), 0u);
  if (tp::rt::nvrtc_available()) {
    ASSERT_TRUE(o.contains("compile_check")) << o.dump(2);
    for (const auto& c : o["compile_check"]["candidates"])
      if (c["status"] != "pruned") EXPECT_EQ(c["status"], "compiled") << c;
  }
}

TEST(TuneCommand, BadInputNamesTheFix) {
  CliResult r = run("tune gemm --shape M=256,N=256,K=256 --space tile=64 --dry-run");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.out.find("--space: unknown knob 'tile'; knobs are bm, bn, bk"), std::string::npos)
      << r.out;
  CliResult a = run("tune gemm --shape M=256,N=256,K=256 --arch sm_70 --dry-run");
  EXPECT_EQ(a.rc, 2);
  EXPECT_NE(a.out.find("arch 'sm_70' has no resource model; use sm_90a or sm_80"),
            std::string::npos)
      << a.out;
}

TEST(TuneCommand, SpecDryRunListsEveryShapeOfEveryDtype) {
  CliResult r = run("tune --spec " + write_spec("dry") + " --dry-run --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["status"], "dry_run");
  EXPECT_EQ(j["op"], "gemm");
  EXPECT_EQ(j["budget_seconds_per_shape"], 30.0);
  ASSERT_EQ(j["shapes"].size(), 6u);
  const std::vector<std::string> labels = {"rep0 bf16", "rep1 bf16", "edge0 bf16",
                                           "rep0 f16",  "rep1 f16",  "edge0 f16"};
  for (size_t i = 0; i < labels.size(); ++i) {
    EXPECT_EQ(j["shapes"][i]["label"], labels[i]);
    EXPECT_GT(j["shapes"][i]["space"]["kept"].get<int>(), 0) << j["shapes"][i];
  }
  EXPECT_EQ(j["shapes"][2]["shape"], "K=133,M=7,N=45,layout=nt");
}

TEST(TuneCommand, SpecWithoutAGpuSaysNotRunAndExits2) {
  if (tp::rt::device_count() > 0) GTEST_SKIP() << "a GPU is present; this checks the no-GPU path";
  CliResult r = run("tune --spec " + write_spec("nogpu") + " --budget-seconds 5");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("edge0 f16  K=133,M=7,N=45,layout=nt: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not run: tuning needs an sm_90a GPU ("), std::string::npos) << r.out;
}

TEST(TuneCommand, SpecBadInputNamesTheFix) {
  const std::string spec = write_spec("bad");
  struct Case {
    std::string args, message;
  };
  for (const Case& c : std::vector<Case>{
           {"tune --spec " + spec + " --dtype f16", "the spec sets the dtypes and the device"},
           {"tune --spec " + spec + " --budget-seconds 0", "--budget-seconds must be > 0"},
           {"tune gemm --shape M=1,N=1,K=1 --pinned-out x.json", "go with --spec"},
           {"tune gemm", "give an operator and --shape"},
           {"tune --spec /nonexistent/spec.yaml", "cannot read the pilot spec"},
           {"tune gemm --spec " + spec, "excludes"}}) {
    CliResult r = run(c.args);
    EXPECT_EQ(r.rc, 2) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << "\n" << r.out;
  }
}

// On the H200: every shape is tuned and, when the winner is not the default, timed side by side
// with it; the pinned table holds exactly the winners at least --min-gain faster.
TEST(GpuTuneCommand, SpecTunesEveryShapeAndComparesWithTheDefault) {
  if (tp::rt::device_count() == 0) GTEST_SKIP() << "no GPU";
  const auto pinned = std::filesystem::temp_directory_path() / "tilepilot-tune-pinned.json";
  CliResult r = run("tune --spec " + write_spec("gpu") + " --budget-seconds 4 --no-store " +
                    "--min-gain 0.05 --json --pinned-out " + pinned.string());
  ASSERT_EQ(r.rc, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["status"], "tuned");
  ASSERT_EQ(j["shapes"].size(), 6u);
  size_t should_pin = 0;
  for (const auto& s : j["shapes"]) {
    const std::string st = s["status"];
    ASSERT_TRUE(st == "compared" || st == "default_best") << s;
    EXPECT_GT(s["default_ms"].get<double>(), 0) << s;
    EXPECT_GT(s["tuned_ms"].get<double>(), 0) << s;
    if (st == "compared") {
      EXPECT_EQ(s["samples_each"], 80) << s;
      EXPECT_NE(s["best_config"], s["default_config"]) << s;
      EXPECT_NEAR(s["speedup"].get<double>(),
                  s["default_ms"].get<double>() / s["tuned_ms"].get<double>(), 1e-9);
      should_pin += s["speedup"].get<double>() >= 1.05;
    }
  }
  EXPECT_GT(j["representative_weighted"]["speedup"].get<double>(), 0);
  // The file is a pinned table the pinned policy loads.
  EXPECT_EQ(tp::autotune::PinnedTable::load(pinned.string()).size(), should_pin);
}
