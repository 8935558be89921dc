// gemm's K padding (pad_k=1, ops/gemm/GemmPadK.h) on the CPU: which shapes it applies to, the
// program it makes (a pad kernel first, the config's own steps reading the padded operands),
// agreement with the fp64 reference on every element with each of the steps after it, and the
// sm_90a default that asks for it.
#include <gtest/gtest.h>

#include "ir/IR.h"
#include "ops/Check.h"
#include "ops/Operator.h"
#include "ops/gemm/GemmGemv.h"
#include "ops/gemm/GemmPadK.h"
#include "tilepilot/tilepilot.h"

using namespace tp;
using namespace tp::ops;

namespace {

const Operator& op() {
  return find_operator("gemm");
}

Problem problem(const std::string& shape, DType dt = DType::bf16) {
  return op().parse(parse_kv(shape, "--shape"), dt);
}

std::vector<int64_t> shape_of(const ArgSpec& a) {
  return a.shape;
}

} // namespace

TEST(GemmPadK, AppliesWhereKLeavesOperandRowsUnaligned) {
  EXPECT_TRUE(padk::pads(problem("M=77,N=45,K=133,layout=nt")));
  EXPECT_FALSE(padk::pads(problem("M=77,N=45,K=136,layout=nt"))); // 272-byte rows
  EXPECT_TRUE(padk::pads(problem("M=77,N=64,K=133,layout=nn")));  // A's rows; B's are aligned
  EXPECT_FALSE(padk::pads(problem("M=77,N=45,K=133,layout=nn"))); // B's rows stay unaligned
  EXPECT_FALSE(padk::pads(problem("M=77,N=45,K=133,layout=tn"))); // B's rows stay unaligned
  EXPECT_FALSE(padk::pads(problem("M=80,N=64,K=133,layout=tn"))); // rows are M and N long
  // tn with A [K, M]'s rows unaligned: A is written transposed, and B only where K needs it.
  EXPECT_TRUE(padk::pads(problem("M=7,N=6144,K=4096,layout=tn")));
  EXPECT_FALSE(padk::pads_b(problem("M=7,N=6144,K=4096,layout=tn")));
  EXPECT_TRUE(padk::pads_b(problem("M=7,N=64,K=133,layout=tn")));
  EXPECT_EQ(padk::steps_layout(problem("M=7,N=64,K=133,layout=tn")), "nn");
  EXPECT_EQ(padk::steps_layout(problem("M=8,N=64,K=133,layout=tn")), "tn");
  EXPECT_FALSE(padk::pads(problem("M=8,N=8,K=12,layout=nt", DType::f32))); // 48-byte rows
  EXPECT_TRUE(padk::pads(problem("M=8,N=8,K=13,layout=nt", DType::f32)));
  EXPECT_EQ(padk::padded_k(problem("M=77,N=45,K=133,layout=nt")), 136);
  EXPECT_EQ(padk::padded_k(problem("M=8,N=8,K=13,layout=nt", DType::f32)), 16);
}

TEST(GemmPadK, ProgramPadsFirstAndTheOtherStepsReadThePaddedOperands) {
  Problem p = problem("M=77,N=45,K=133,layout=nt");
  Config c = op().default_config(p, "sm_90a");
  ASSERT_EQ(c.at("pad_k"), 1);
  KernelProgram prog = op().program(p, c);
  ASSERT_EQ(prog.steps.size(), 2u);
  EXPECT_EQ(prog.steps[0].kernel->name, "gemm_nt_pad_k");
  EXPECT_EQ(prog.steps[1].kernel->name, "gemm_nt");
  ASSERT_EQ(prog.intermediates.size(), 2u);
  EXPECT_EQ(shape_of(prog.intermediates[0]), (std::vector<int64_t>{77, 136}));
  EXPECT_EQ(shape_of(prog.intermediates[1]), (std::vector<int64_t>{45, 136}));
  EXPECT_EQ(prog.steps[0].args, (std::vector<int>{0, 1, 3, 4}));
  EXPECT_EQ(prog.steps[1].args, (std::vector<int>{3, 4, 2}));

  // With split-K: the partials stay intermediate 0 (bound as 3); the padded operands follow.
  Config s = c;
  s["splits"] = 2;
  s["persistent"] = 0;
  s["cluster"] = 1;
  KernelProgram ps = op().program(p, s);
  ASSERT_EQ(ps.steps.size(), 3u);
  EXPECT_EQ(ps.steps[0].args, (std::vector<int>{0, 1, 4, 5}));
  EXPECT_EQ(ps.steps[1].args, (std::vector<int>{4, 5, 3}));
  EXPECT_EQ(ps.steps[2].args, (std::vector<int>{3, 2}));

  // nn pads A's rows and gives B [K, N] zero rows up to the padded K.
  Problem nn = problem("M=77,N=64,K=133,layout=nn");
  Config cn = op().default_config(nn, "sm_90a");
  KernelProgram pn = op().program(nn, cn);
  ASSERT_EQ(pn.intermediates.size(), 2u);
  EXPECT_EQ(shape_of(pn.intermediates[1]), (std::vector<int64_t>{136, 64}));

  // Where the rows are aligned, pad_k=1 changes nothing: one step on the call's arguments.
  Problem aligned = problem("M=77,N=45,K=136,layout=nt");
  Config ca = op().default_config(aligned, "sm_90a");
  EXPECT_EQ(ca.count("pad_k"), 0u);
  ca["pad_k"] = 1;
  KernelProgram pa = op().program(aligned, ca);
  ASSERT_EQ(pa.steps.size(), 1u);
  EXPECT_EQ(pa.steps[0].args, (std::vector<int>{0, 1, 2}));
}

TEST(GemmPadK, TnWithUnalignedRowsOfATransposesAOnlyAndRunsTheNnSteps) {
  // Decode's M = 7: the first kernel writes A [K, M] as [M, K]; B, the large operand, is read
  // where it lies, and the default after it is nn's (split-K here).
  Problem p = problem("M=7,N=6144,K=4096,layout=tn");
  Config c = op().default_config(p, "sm_90a");
  ASSERT_EQ(c.at("pad_k"), 1);
  Problem nn = problem("M=7,N=6144,K=4096,layout=nn");
  Config cn = op().default_config(nn, "sm_90a");
  for (const auto& [knob, value] : cn)
    EXPECT_EQ(c.at(knob), value) << knob;
  KernelProgram prog = op().program(p, c);
  ASSERT_GE(prog.steps.size(), 2u);
  EXPECT_EQ(prog.steps[0].kernel->name, "gemm_tn_pad_k");
  const int ap = static_cast<int>(prog.intermediates.size()) + 2; // the last intermediate
  EXPECT_EQ(prog.steps[0].args, (std::vector<int>{0, ap}));
  EXPECT_EQ(shape_of(prog.intermediates.back()), (std::vector<int64_t>{7, 4096}));
  // Every later step reads the transposed A and the call's own B.
  for (size_t s = 1; s < prog.steps.size(); ++s) {
    EXPECT_EQ(prog.steps[s].kernel->name.find("gemm_tn"), std::string::npos);
    for (int a : prog.steps[s].args)
      EXPECT_NE(a, 0) << "step " << s;
  }
  EXPECT_EQ(prog.steps[1].args[0], ap);
  EXPECT_EQ(prog.steps[1].args[1], 1);
  // A GEMV after it is allowed (its steps are nn); without the first kernel it is refused.
  Config g = gemv::gemv_config();
  g["pad_k"] = 1;
  check_config(op(), p, g, "sm_90a");
  g["pad_k"] = 0;
  EXPECT_THROW(check_config(op(), p, g, "sm_90a"), UserError);
}

TEST(GemmPadK, DefaultAsksForItOnlyOnThePlainSm90Kernel) {
  EXPECT_EQ(op().default_config(problem("M=2048,N=2048,K=2047,layout=nt"), "sm_90a").at("pad_k"),
            1);
  // Decode rows take split-K's or the GEMV's rule, which read the call's operands.
  EXPECT_EQ(op().default_config(problem("M=7,N=6144,K=4095,layout=nt"), "sm_90a").count("pad_k"),
            0u);
  EXPECT_EQ(op().default_config(problem("M=77,N=45,K=133,layout=nt"), "sm_80").count("pad_k"), 0u);
}

TEST(GemmPadK, AgreesWithFp64ReferenceOnEveryElementWithEachFollowingStep) {
  struct Case {
    std::string shape;
    DType dtype;
    std::string config;
  };
  const std::vector<Case> cases = {
      {"M=77,N=45,K=133,layout=nt", DType::bf16, "pad_k=1"},
      {"M=100,N=64,K=37,layout=nn", DType::bf16, "pad_k=1"},
      {"M=9,N=20,K=13,layout=nt", DType::f32, "pad_k=1"},
      // tn: A transposed alone (K aligned), and with B's zero rows (K odd), 33 rows of A
      // (two 32-row tiles of the transpose), a GEMV after it.
      {"M=7,N=64,K=136,layout=tn", DType::bf16, "pad_k=1"},
      {"M=33,N=48,K=133,layout=tn", DType::f16, "pad_k=1"},
      {"M=3,N=40,K=77,layout=tn", DType::bf16,
       "pad_k=1,gemv=1,bn=16,bk=64,stages=2,threads=256,splits=1"},
      {"M=70,N=45,K=133,layout=nt", DType::f16, "pad_k=1,splits=2"},
      {"M=3,N=45,K=133,layout=nt", DType::bf16,
       "pad_k=1,gemv=2,bn=16,bk=128,stages=3,threads=256,splits=1"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.shape + " " + k.config);
    Problem p = problem(k.shape, k.dtype);
    CheckOptions o;
    // The config's knobs over the shape's sm_90a default (the interpreter runs any config).
    o.config = op().default_config(p, "sm_90a");
    for (const auto& [knob, value] : parse_config(k.config))
      o.config[knob] = value;
    CheckResult r = check(op(), p, o);
    EXPECT_TRUE(r.passed) << r.first_bad;
    EXPECT_EQ(r.checked, p.at("M") * p.at("N"));
  }
}
