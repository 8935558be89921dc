// The interpreter agrees with the fp64 references across the operator matrix: tiny and odd
// shapes, every dtype and layout, causal on/off, Skv != S, grouped heads, padded batches, head
// dims 64/128/256, and the log-sum-exp output. Each case uses fresh seeded inputs and poisoned
// outputs (see ops/Check.h).
#include <gtest/gtest.h>

#include "codegen/cpu/Interpreter.h"
#include "ops/Check.h"

using namespace tp;
using namespace tp::ops;

namespace {

struct Case {
  std::string op, shape;
  DType dtype;
  std::string config; // empty: the CPU default
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
  std::string n = info.param.op + "_" + info.param.shape + "_" + dtype_name(info.param.dtype);
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n + "_" + std::to_string(info.index);
}

std::vector<Case> gemm_cases() {
  std::vector<Case> out;
  for (std::string layout : {"nn", "nt", "tn"})
    for (DType t : {DType::bf16, DType::f16, DType::f32})
      for (std::string mnk : {"M=1,N=45,K=133", "M=7,N=64,K=64", "M=129,N=17,K=300"})
        out.push_back({"gemm", mnk + ",layout=" + layout, t, ""});
  // Tiles that do not divide anything, and a deeper pipeline.
  out.push_back(
      {"gemm", "M=100,N=90,K=70,layout=nn", DType::bf16, "bm=32,bn=48,bk=16,stages=3,threads=64"});
  out.push_back(
      {"gemm", "M=65,N=130,K=33,layout=tn", DType::f16, "bm=64,bn=128,bk=32,stages=4,threads=128"});
  return out;
}

std::vector<Case> attention_cases() {
  std::vector<Case> out;
  for (DType t : {DType::bf16, DType::f16}) {
    out.push_back({"attention", "B=1,H=2,S=1,D=64", t, ""});
    out.push_back({"attention", "B=1,H=2,S=1,D=64,causal=1", t, ""});
    out.push_back({"attention", "B=2,H=2,S=77,D=64", t, ""});
    out.push_back({"attention", "B=2,H=2,S=77,D=64,causal=1", t, ""});
    out.push_back({"attention", "B=1,H=1,S=1023,D=64,causal=1", t, ""});
    out.push_back({"attention", "B=1,H=4,Hkv=1,S=77,D=128", t, ""});
    out.push_back({"attention", "B=1,H=8,Hkv=2,S=40,Skv=100,D=64,causal=1", t, ""});
    out.push_back({"attention", "B=1,H=2,S=100,Skv=40,D=64,causal=1", t, ""});
    out.push_back({"attention", "B=3,H=2,S=50,Skv=90,D=64,lens=90:1:37", t, ""});
    out.push_back({"attention", "B=3,H=2,S=50,Skv=90,D=64,causal=1,lens=90:0:37,lse=1", t, ""});
    out.push_back({"attention", "B=1,H=1,S=70,D=256,lse=1", t, ""});
    out.push_back(
        {"attention", "B=1,H=2,S=65,D=128,causal=1", t, "bm=32,bn=16,stages=2,threads=128"});
  }
  return out;
}

class InterpreterMatrix : public testing::TestWithParam<Case> {};

TEST_P(InterpreterMatrix, AgreesWithFp64Reference) {
  const Case& c = GetParam();
  const Operator& op = find_operator(c.op);
  Problem p = op.parse(parse_kv(c.shape, "shape"), c.dtype);
  CheckOptions o;
  o.seed = 1234;
  if (!c.config.empty()) o.config = parse_config(c.config);
  CheckResult r = check(op, p, o);
  EXPECT_TRUE(r.passed) << to_json(r).dump();
  EXPECT_EQ(r.blocks_run, r.blocks_total) << "CI cases must run every block";
  EXPECT_EQ(r.nonfinite, 0);
  EXPECT_GT(r.checked, 0);
}

INSTANTIATE_TEST_SUITE_P(Gemm, InterpreterMatrix, testing::ValuesIn(gemm_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Attention, InterpreterMatrix, testing::ValuesIn(attention_cases()),
                         case_name);

// A sampled check runs some blocks and compares exactly the rows they write. The causal kernel
// launches its query blocks in reverse; block_outputs once ignored that, so a sampled causal check
// compared rows no sampled block had written (still poisoned) and failed a correct kernel.
TEST(InterpreterMatrixSampled, CausalAttentionComparesTheRowsItsSampledBlocksWrite) {
  const Operator& op = find_operator("attention");
  for (const char* shape : {"B=1,H=4,S=700,D=64,causal=1", "B=1,H=4,S=700,D=64"}) {
    Problem p = op.parse(parse_kv(shape, "shape"), DType::bf16);
    CheckOptions o;
    o.flop_budget = 1e8; // about half of the 44 blocks
    CheckResult r = check(op, p, o);
    EXPECT_TRUE(r.passed) << shape << " " << to_json(r).dump();
    EXPECT_LT(r.blocks_run, r.blocks_total) << shape << ": the case must sample";
    EXPECT_EQ(r.nonfinite, 0) << shape;
  }
}

// A check must be able to fail: a kernel that computes the wrong thing is caught.
TEST(InterpreterMatrixNegative, WrongLayoutIsCaught) {
  const Operator& op = find_operator("gemm");
  Problem p = op.parse(parse_kv("M=33,N=40,K=50,layout=nn", "shape"), DType::bf16);
  CheckOptions o;
  CheckResult good = check(op, p, o);
  ASSERT_TRUE(good.passed);
  // Same data, but a kernel built for B transposed: the reference disagrees.
  Problem wrong = p;
  wrong.options["layout"] = "nt";
  Kernel k = op.build(wrong, op.default_config(p, "cpu"));
  CheckResult bad = check_with(op, p, o,
                               [&](const Kernel&, std::vector<HostTensor>& args,
                                   const std::vector<std::array<int64_t, 3>>& blocks) {
                                 // B is [K, N] = [50, 40] but the nt kernel expects [N, K]; reshape
                                 // the view to [40, 50].
                                 HostTensor b2(DType::bf16, {40, 50});
                                 for (int64_t i = 0; i < b2.numel(); ++i)
                                   b2.set(i, args[1].get(i));
                                 std::vector<HostTensor*> ptrs = {&args[0], &b2, &args[2]};
                                 cpu::InterpretOptions io;
                                 io.blocks = blocks;
                                 cpu::interpret(k, ptrs, io);
                               });
  EXPECT_FALSE(bad.passed);
  EXPECT_GT(bad.bad, 0);
  EXPECT_FALSE(bad.first_bad.empty());
}

TEST(InterpreterMatrixNegative, UnwrittenOutputIsCaught) {
  const Operator& op = find_operator("gemm");
  Problem p = op.parse(parse_kv("M=64,N=64,K=16", "shape"), DType::bf16);
  CheckResult r = check_with(
      op, p, {},
      [](const Kernel&, std::vector<HostTensor>&, const std::vector<std::array<int64_t, 3>>&) {});
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.nonfinite, r.checked) << "poisoned outputs must stay NaN and fail";
}

} // namespace
