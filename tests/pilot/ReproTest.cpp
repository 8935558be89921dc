// The failure path end to end: a test-only broken kernel (inject_fault: wrong_scale) fails
// correctness, the failing case is shrunk, a reproducer folder is written, and the real
// `tilepilot repro` binary replays the same failure (exit 1). Also: the fault is a property of
// the kernel (the real kernel passes the same case), and CLI exit codes for bad input.
#include <filesystem>

#include "PilotTestSupport.h"
#include "pilot/FaultyOperator.h"
#include "pilot/Pilot.h"

using namespace tp;
using namespace tp::pilot;
using namespace tp::release;
using namespace tp::pilot::testing;

TEST(PilotFault, WrongScaleBreaksTheKernelNotTheCheck) {
  for (const auto& [name, kv] :
       std::vector<std::pair<std::string, std::map<std::string, std::string>>>{
           {"gemm", {{"M", "33"}, {"N", "40"}, {"K", "70"}}},
           {"attention", {{"B", "1"}, {"H", "2"}, {"S", "40"}, {"D", "64"}, {"causal", "1"}}}}) {
    const ops::Operator& op = ops::find_operator(name);
    ops::Problem p = op.parse(kv, DType::bf16);
    EXPECT_TRUE(ops::check(op, p, {}).passed) << name;
    auto faulty = with_fault(op, "wrong_scale");
    ops::CheckResult r = ops::check(*faulty, p, {});
    EXPECT_FALSE(r.passed) << name;
    EXPECT_GT(r.bad, 0) << name;
  }
}

TEST(PilotFault, FaultySpecWritesAReproducerThatReplays) {
  std::string dir = scratch_dir();
  write_text(dir + "/faulty.yaml", small_gemm_spec("inject_fault: wrong_scale\n"));
  CliResult p = run_cli("pilot " + dir + "/faulty.yaml --out " + dir + "/out --no-progress");
  EXPECT_EQ(p.rc, 1) << p.out;
  EXPECT_NE(p.out.find("correctness  failed"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("decision: keep framework operator"), std::string::npos) << p.out;

  std::string repro = dir + "/out/repro";
  for (const char* f : {"repro.json", "kernel.ir.txt", "kernel.cu.txt", "nvrtc.log",
                        "resources.json", "command.txt"})
    EXPECT_TRUE(std::filesystem::exists(repro + "/" + f)) << f;
  nlohmann::json j = read_json(repro + "/repro.json");
  EXPECT_EQ(j["case"]["inject_fault"], "wrong_scale");
  EXPECT_FALSE(j["failure"]["passed"].get<bool>());
  // cpu here; cuda where the lead's backend hooks and an sm_90a GPU are present.
  EXPECT_TRUE(j["case"]["backend"] == "cpu" || j["case"]["backend"] == "cuda") << j["case"];
  // Shrunk: smaller than every failing case of the spec.
  const auto& shape = j["case"]["problem"]["shape"];
  EXPECT_LT(shape["M"].get<int>() * shape["N"].get<int>() * shape["K"].get<int>(), 7 * 45 * 133)
      << j["shrink"];
  EXPECT_NE(read_text(repro + "/kernel.ir.txt").find("fault_i0"), std::string::npos);
  // Generated CUDA, or "not produced: <reason>" in a build without Backends::compile_only.
  EXPECT_FALSE(read_text(repro + "/kernel.cu.txt").empty());
  std::string cmd = read_text(repro + "/command.txt");
  EXPECT_NE(cmd.find(" repro " + std::filesystem::absolute(repro).lexically_normal().string()),
            std::string::npos)
      << cmd;
  EXPECT_TRUE(std::filesystem::exists(dir + "/out/keep-framework.md"));

  CliResult r = run_cli("repro " + repro);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("the case still fails, with the same failure"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("test-only fault 'wrong_scale'"), std::string::npos) << r.out;

  // With the fault removed from the reproducer, the same case passes: the kernel was at fault.
  j["case"]["inject_fault"] = "";
  write_text(repro + "/repro.json", j.dump(2));
  CliResult fixed = run_cli("repro " + repro);
  EXPECT_EQ(fixed.rc, 0) << fixed.out;
  EXPECT_NE(fixed.out.find("the case now passes"), std::string::npos) << fixed.out;
}

TEST(PilotFault, AttentionFaultShrinksAndReplays) {
  std::string dir = scratch_dir();
  write_text(dir + "/att.yaml", R"(operator: attention
device: sm_90a
dtypes: [bf16]
shapes:
  representative: [{B: 2, H: 4, S: 128, D: 64, Hkv: 2, causal: 1}]
reference: framework
tolerance: {atol: 2e-2, rtol: 2e-2}
objective: {metric: weighted_latency, min_speedup: 1.1}
memory_limit_mb: 512
metrics: [correctness, warm, memory]
fallback: required
inject_fault: wrong_scale
)");
  CliResult p = run_cli("pilot " + dir + "/att.yaml --out " + dir + "/out");
  EXPECT_EQ(p.rc, 1) << p.out;
  nlohmann::json j = read_json(dir + "/out/repro/repro.json");
  EXPECT_LT(j["case"]["problem"]["shape"]["S"].get<int>(), 128) << j["shrink"];
  CliResult r = run_cli("repro " + dir + "/out/repro");
  EXPECT_EQ(r.rc, 1) << r.out;
}

TEST(PilotCli, BadSpecExitsTwoWithLocatedMessage) {
  std::string dir = scratch_dir();
  std::string text = small_gemm_spec();
  text.replace(text.find("fallback: required"), 18, "fallbak: required");
  write_text(dir + "/bad.yaml", text);
  CliResult r = run_cli("pilot " + dir + "/bad.yaml --out " + dir + "/out");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_EQ(r.out.rfind(dir + "/bad.yaml:15:1: error: unknown key 'fallbak' in the spec; did you "
                              "mean 'fallback'?",
                        0),
            0u)
      << r.out;
  CliResult missing = run_cli("repro " + dir + "/nowhere");
  EXPECT_EQ(missing.rc, 2) << missing.out;
  EXPECT_NE(missing.out.find("cannot read"), std::string::npos) << missing.out;
}

TEST(PilotCli, PilotWithoutGpuExitsZeroAndPrintsTheDecision) {
  std::string dir = scratch_dir();
  write_text(dir + "/ok.yaml", small_gemm_spec());
  CliResult r = run_cli("pilot " + dir + "/ok.yaml --out " + dir + "/out");
  // This machine may or may not have an sm_90a GPU; without one the decision is undecided.
  if (r.out.find("no sm_90a device") == std::string::npos) GTEST_SKIP() << "a GPU is present";
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("decision: undecided"), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::exists(dir + "/out/report.html"));
}
