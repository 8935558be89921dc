// `tilepilot tune` end to end through the binary: --dry-run prints the pruned space and exits 0;
// without a GPU the command says "not run: measurement needs an sm_90a GPU (...)" and exits 2;
// bad input names what to fix.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "RunCli.h"
#include "runtime/Nvrtc.h"
#include "tilepilot/runtime.h"

namespace {

using tp::testing::CliResult;

CliResult run(const std::string& args) {
  return tp::testing::run_cli(args);
}

} // namespace

TEST(TuneCommand, DryRunPrintsThePrunedSpace) {
  CliResult r = run("tune gemm --shape M=4096,N=4096,K=4096 --arch sm_90a --dry-run");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("space: 1152 configs, "), std::string::npos) << r.out;
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
  // Without a GPU every kept candidate is compile-checked with NVRTC (the CUDA hooks are
  // registered): a narrow --space keeps that to a few compiles.
  const std::string space = " --space 'bm=128,bn=128|256,stages=3,threads=256,swizzle=0'";
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
