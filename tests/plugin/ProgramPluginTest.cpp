// A plug-in's operator that runs two kernels per call (tests/plugin/modules/ProgramPlugin.cpp):
// loaded in process, its program is validated and checked on the interpreter; through the CLI,
// `show` prints both steps headed by their names and `check` passes.
#include <gtest/gtest.h>

#include "../support/RunCli.h"
#include "ops/Check.h"
#include "tilepilot/plugin.h"

using namespace tp;

namespace {

const std::string kPlugin = std::string(TILEPILOT_PLUGIN_MODULES_DIR) + "/libprogram_plugin.so";

} // namespace

TEST(ProgramPlugin, LoadedInProcessItsTwoKernelProgramPassesTheCheck) {
  ops::load_plugin(kPlugin);
  const ops::Operator& op = ops::find_operator("test_two_pass_rowsum");
  ops::Problem p = op.parse({{"R", "40"}, {"C", "100"}}, DType::f32);
  ops::KernelProgram prog = ops::checked_program(op, p, op.default_config(p, "cpu"));
  ASSERT_EQ(prog.steps.size(), 2u);
  EXPECT_EQ(prog.intermediates.size(), 1u);
  ops::CheckResult r = ops::check(op, p, {});
  EXPECT_TRUE(r.passed) << r.first_bad;
  EXPECT_EQ(r.checked, 40);
}

TEST(ProgramPlugin, ShowPrintsEveryStepHeadedByItsName) {
  for (const std::string stage : {"ir", "cuda"}) {
    tp::testing::CliResult r = tp::testing::run_cli(
        "--plugin " + kPlugin + " show test_two_pass_rowsum --dtype f32 --stage " + stage);
    ASSERT_EQ(r.rc, 0) << r.out;
    const size_t first = r.out.find("// ===== step 0 of 2: rowsum_partials =====");
    const size_t second = r.out.find("// ===== step 1 of 2: rowsum_combine =====");
    EXPECT_NE(first, std::string::npos) << stage << ":\n" << r.out;
    EXPECT_NE(second, std::string::npos) << stage << ":\n" << r.out;
    EXPECT_LT(first, second) << "steps print in order";
  }
}

TEST(ProgramPlugin, CliCheckOnTheInterpreterPasses) {
  tp::testing::CliResult r = tp::testing::run_cli(
      "--plugin " + kPlugin + " check test_two_pass_rowsum --shape R=40,C=100 --dtype f32 --json");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("\"passed\":true"), std::string::npos) << r.out;
}
