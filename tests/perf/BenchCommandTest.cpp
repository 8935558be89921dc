// `tilepilot bench` through the binary: bad input names the fix (exit 2, on any machine); without
// a GPU the command says "bench needs a GPU (<reason>)" and exits 2, in text and in JSON.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "RunCli.h"
#include "tilepilot/runtime.h"

namespace {

using tp::testing::CliResult;

CliResult run(const std::string& args) {
  return tp::testing::run_cli(args);
}

void expect_says(const CliResult& r, const std::string& text) {
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find(text), std::string::npos) << r.out;
}

} // namespace

TEST(BenchCommand, BadInputNamesTheFix) {
  expect_says(run("bench conv --shape M=1"), "conv");
  expect_says(run("bench gemm --shape M=64,N=64,Q=3"), "Q");
  expect_says(run("bench gemm --shape M=64,N=64,K=64 --dtype i32"),
              "unsupported --dtype 'i32'; use bf16, f16 or f32");
  expect_says(run("bench gemm --shape M=64,N=64,K=64 --backend cpu"),
              "bench measures the cuda backend (use --backend cuda");
  expect_says(run("bench gemm --shape M=64,N=64,K=64 --vs torch"), "(--vs reference)");
  expect_says(run("bench gemm --shape M=64,N=64,K=64 --runs 0"), "--runs 0 must be in [1, 100000]");
  expect_says(run("bench gemm --shape M=64,N=64,K=64 --config bm=64,nonsense=3"), "nonsense");
  expect_says(run("bench gemm"), "--shape is required");
}

TEST(BenchCommand, WithoutAGpuSaysSoAndExits2) {
  if (tp::rt::device_count() > 0) GTEST_SKIP() << "a GPU is present; this checks the no-GPU path";
  CliResult r = run("bench gemm --shape M=256,N=256,K=256");
  expect_says(r, "tilepilot: bench needs a GPU (");
  EXPECT_NE(r.out.find("--backend cpu"), std::string::npos) << "says what works here: " << r.out;
  CliResult j = run("bench attention --shape B=1,H=2,S=128,D=64 --json");
  EXPECT_EQ(j.rc, 2) << j.out;
  nlohmann::json o = nlohmann::json::parse(j.out);
  EXPECT_EQ(o["status"], "not_run");
  EXPECT_EQ(o["op"], "attention");
  EXPECT_EQ(o["reason"].get<std::string>().rfind("not run: bench needs a GPU (", 0), 0u) << o;
  EXPECT_FALSE(o.contains("ms_median")) << "no number that was not measured";
}

// The config policy's input is checked before the GPU is looked for, so these hold everywhere.
TEST(BenchCommand, PolicyInputNamesTheFix) {
  const std::string shape = "bench gemm --shape M=64,N=64,K=64 ";
  expect_says(run(shape + "--policy fastest"),
              "--policy 'fastest' is unknown; use pinned or adaptive");
  expect_says(run(shape + "--policy pinned"), "--policy pinned needs --pinned FILE");
  expect_says(run(shape + "--policy adaptive --config bm=64"), "give one");
  expect_says(run(shape + "--pinned x.json"), "--pinned goes with --policy pinned");
  expect_says(run(shape + "--policy adaptive --budget-seconds 0"), "must be > 0");
  const auto bad = std::filesystem::temp_directory_path() / "tilepilot-bench-bad-pinned.json";
  std::ofstream(bad) << "{\"format\": 1, \"entries\": [{\"key\": {}}]}";
  CliResult r = run(shape + "--policy pinned --pinned " + bad.string());
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find(bad.string()), std::string::npos) << "names the file: " << r.out;
}

// On the H200: the pinned table tune --spec wrote there (run s13) chooses the decode shape's
// config; adaptive tunes on the first call and reads the database on the second.
TEST(GpuBenchCommand, PoliciesChooseTheConfigAndSaySo) {
  if (tp::rt::device_count() == 0) GTEST_SKIP() << "no GPU";
  const std::string table =
      std::string(TILEPILOT_SOURCE_DIR) + "/docs/bench/2026-11-30-s13-pinned-gemm.json";
  CliResult p = run("bench gemm --shape M=1,N=4096,K=4096,layout=nt --runs 5 --warmup 1 --json "
                    "--policy pinned --pinned " +
                    table);
  ASSERT_EQ(p.rc, 0) << p.out;
  nlohmann::json pj = nlohmann::json::parse(p.out);
  EXPECT_EQ(pj["config_choice"]["source"], "pinned") << pj["config_choice"];
  EXPECT_NE(pj["config"].get<std::string>().find("bm=64,"), std::string::npos) << pj["config"];
  const auto db = std::filesystem::temp_directory_path() / "tilepilot-bench-adaptive-db";
  std::filesystem::remove_all(db);
  const std::string env = "TILEPILOT_TUNE_DB=" + db.string();
  const std::string adaptive = "bench gemm --shape M=7,N=640,K=512,layout=nt --runs 5 --warmup 1 "
                               "--json --policy adaptive --budget-seconds 8";
  for (const char* expected : {"tuned", "db"}) {
    CliResult r = tp::testing::run_cli(adaptive, env);
    ASSERT_EQ(r.rc, 0) << r.out;
    nlohmann::json j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
    EXPECT_EQ(j["config_choice"]["source"], expected) << j["config_choice"];
  }
}

// A fresh process with an empty TilePilot cache, and nothing set in its environment about
// NVRTC's own cache: its cold compile must run ptxas (a register count in the report, and
// NVRTC time of a real compile), even though cuBLASLt, which loads NVRTC too, runs first.
TEST(GpuBenchCommand, ColdCompileInAFreshProcessRunsPtxas) {
  if (tp::rt::device_count() == 0) GTEST_SKIP() << "no GPU";
  const auto cache = std::filesystem::temp_directory_path() / "tilepilot-bench-cold-cache";
  std::filesystem::remove_all(cache);
  CliResult r =
      tp::testing::run_cli("bench gemm --shape M=512,N=512,K=512 --runs 3 --warmup 1 --json",
                           "env -u CUDA_CACHE_DISABLE TILEPILOT_CACHE_DIR=" + cache.string());
  ASSERT_EQ(r.rc, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_GT(j["compile"]["cold_registers"].get<int>(), 0) << j["compile"];
  double nvrtc_ms = j["compile"]["cold_phases_ms"]["nvrtc"].get<double>();
  EXPECT_GT(nvrtc_ms, 150) << "a cache hit took 25-64 ms on the H200: " << j["compile"];
}
