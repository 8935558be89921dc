// decode_attention's split-KV path through the Operator (DecodeAttentionOp::program): the
// `splits` knob, the default that fills the GPU, the two-step program and its intermediates,
// and the operator's own check on the interpreter with splits > 1 (the kernels themselves:
// DecodeAttentionSplitKvTest.cpp).
#include <gtest/gtest.h>

#include "ops/Check.h"
#include "ops/Operator.h"
#include "tilepilot/error.h"

using namespace tp;
using namespace tp::ops;

namespace {

const Operator& op() {
  return find_operator("decode_attention");
}

Problem problem(const std::map<std::string, std::string>& kv) {
  return op().parse(kv, DType::bf16);
}

} // namespace

// Batch 1 on Llama-3-8B is 8 blocks without splits: the default splits to fill 132 SMs; batch
// 16 already has 128 blocks and stays one kernel.
TEST(DecodeAttentionProgram, DefaultSplitsOnlyWhereTheGridIsSmall) {
  Config small = op().default_config(
      problem({{"B", "1"}, {"H", "32"}, {"Hkv", "8"}, {"D", "128"}, {"L", "8192"}}), "sm_90a");
  EXPECT_EQ(small.at("splits"), 16);
  Config big = op().default_config(
      problem({{"B", "16"}, {"H", "32"}, {"Hkv", "8"}, {"D", "128"}, {"L", "32768"}}), "sm_90a");
  EXPECT_EQ(big.at("splits"), 1);
}

TEST(DecodeAttentionProgram, SplitsMakeTwoStepsThroughTwoIntermediates) {
  Problem p = problem({{"B", "2"}, {"H", "8"}, {"Hkv", "2"}, {"D", "64"}, {"L", "333"}});
  Config c = op().default_config(p, "cpu");
  c["splits"] = 3;
  KernelProgram prog = checked_program(op(), p, c);
  ASSERT_EQ(prog.steps.size(), 2u);
  ASSERT_EQ(prog.intermediates.size(), 2u);
  EXPECT_EQ(prog.intermediates[0].dtype, DType::f32);
  EXPECT_EQ(prog.intermediates[0].shape, (std::vector<int64_t>{2, 8, 3, 1, 64}));
  // q, k, v -> split -> o_part, lse_part (call args 0..2, intermediates 4, 5); combine -> out.
  EXPECT_EQ(prog.steps[0].args, (std::vector<int>{0, 1, 2, 4, 5}));
  EXPECT_EQ(prog.steps[1].args, (std::vector<int>{4, 5, 3}));
  // splits=1, and a config without the knob (a release pinned before it): one kernel.
  c["splits"] = 1;
  EXPECT_EQ(checked_program(op(), p, c).steps.size(), 1u);
  c.erase("splits");
  EXPECT_EQ(checked_program(op(), p, c).steps.size(), 1u);
  check_config(op(), p, c, "sm_90a"); // an absent splits is valid (neutral 1)
}

TEST(DecodeAttentionProgram, CheckPassesWithSplitsOnTheInterpreter) {
  struct Case {
    std::map<std::string, std::string> shape;
    int64_t splits;
  };
  const std::vector<Case> cases = {
      {{{"B", "2"}, {"H", "8"}, {"Hkv", "2"}, {"D", "64"}, {"L", "333"}}, 3},
      {{{"B", "3"}, {"H", "8"}, {"Hkv", "2"}, {"D", "64"}, {"L", "100"}, {"lens", "0:1:100"}}, 4},
      {{{"B", "2"},
        {"H", "4"},
        {"Hkv", "4"},
        {"Sq", "2"},
        {"D", "64"},
        {"L", "150"},
        {"paged", "1"},
        {"block", "16"}},
       5},
  };
  for (const Case& k : cases) {
    Problem p = problem(k.shape);
    CheckOptions o;
    o.config = op().default_config(p, "cpu");
    o.config["splits"] = k.splits;
    CheckResult r = check(op(), p, o);
    EXPECT_TRUE(r.passed) << config_str(o.config) << ": " << r.first_bad;
    EXPECT_GT(r.checked, 0);
  }
}

TEST(DecodeAttentionProgram, SplitsOutsideTheRangeAreAUserError) {
  Problem p = problem({{"B", "1"}, {"H", "8"}, {"Hkv", "2"}, {"D", "64"}, {"L", "64"}});
  Config c = op().default_config(p, "sm_90a");
  c["splits"] = 65;
  try {
    check_config(op(), p, c, "sm_90a");
    ADD_FAILURE() << "splits=65 accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("splits"), std::string::npos) << e.what();
  }
}
