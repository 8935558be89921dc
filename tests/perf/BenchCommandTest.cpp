// `tilepilot bench` through the binary: bad input names the fix (exit 2, on any machine); without
// a GPU the command says "bench needs a GPU (<reason>)" and exits 2, in text and in JSON.
#include <gtest/gtest.h>

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
  expect_says(run("bench gemm --shape M=64,N=64,K=64 --runs 0"), "--runs 0 must be at least 1");
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
