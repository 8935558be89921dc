// rmsnorm, swiglu and rope as registered Operators, on the CPU: the registry has them as
// built-ins; check() through each Operator (grid, block boxes, reference) passes at odd shapes
// and a Llama-3 shape; arg_specs, make_args and outputs agree; problem_for and
// problem_from_inputs give back the problem from its tensors' shapes and reject tensors that
// do not fit with a message naming the tensor; every default config is within the knobs'
// ranges on every arch.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/Check.h"

using namespace tp;
using namespace tp::ops;

namespace {

struct Case {
  std::string op, shape;
  DType dtype;
};

std::vector<Case> cases() {
  return {{"rmsnorm", "T=33,H=1000,residual=1", DType::bf16},
          {"rmsnorm", "T=7,H=4096", DType::f16},
          {"rmsnorm", "T=1,H=8192,residual=1", DType::f32},
          {"swiglu", "T=33,I=1000", DType::bf16},
          {"swiglu", "T=1,I=14336", DType::f32},
          {"rope", "T=7,H=32,Hkv=8,D=128,start=131064", DType::bf16},
          {"rope", "T=33,H=5,Hkv=1,D=64", DType::f16},
          {"rope", "T=3,H=4,Hkv=4,D=128,base=10000,scaling=none", DType::bf16}};
}

std::string case_name(const testing::TestParamInfo<Case>& i) {
  std::string n = i.param.op + "_" + i.param.shape + "_" + dtype_name(i.param.dtype);
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

class LlamaOps : public testing::TestWithParam<Case> {
protected:
  const Operator& op() const { return find_operator(GetParam().op); }
  Problem problem() const {
    return op().parse(parse_kv(GetParam().shape, "--shape"), GetParam().dtype);
  }
};

TEST_P(LlamaOps, CheckThroughTheOperatorPasses) {
  CheckOptions o;
  o.seed = 77;
  CheckResult r = check(op(), problem(), o);
  EXPECT_TRUE(r.passed) << to_json(r).dump();
  EXPECT_EQ(r.blocks_run, r.blocks_total) << "small cases run every block";
  EXPECT_EQ(r.nonfinite, 0);
  // Every output element is checked: the blocks' boxes cover the outputs.
  int64_t elems = 0;
  std::vector<ArgSpec> specs = op().arg_specs(problem());
  for (int i : op().outputs(problem())) {
    int64_t n = 1;
    for (int64_t e : specs[i].shape)
      n *= e;
    elems += n;
  }
  EXPECT_EQ(r.checked, elems);
}

TEST_P(LlamaOps, ArgSpecsMakeArgsAndOutputsAgree) {
  Problem p = problem();
  std::vector<ArgSpec> specs = op().arg_specs(p);
  std::vector<HostTensor> args = op().make_args(p, 3);
  ASSERT_EQ(args.size(), specs.size());
  std::vector<int> outs = op().outputs(p);
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(args[i].dtype(), specs[i].dtype) << "argument " << i;
    EXPECT_EQ(args[i].shape(), specs[i].shape) << "argument " << i;
    bool is_out = std::count(outs.begin(), outs.end(), static_cast<int>(i)) > 0;
    if (is_out && is_float(args[i].dtype())) EXPECT_TRUE(std::isnan(args[i].get(0))) << i;
    if (!is_out && is_float(args[i].dtype())) EXPECT_TRUE(std::isfinite(args[i].get(0))) << i;
  }
  EXPECT_EQ(outs.back(), static_cast<int>(specs.size()) - 1) << "outputs come last";
}

TEST_P(LlamaOps, ProblemComesBackFromTheTensorsShapes) {
  Problem p = problem();
  std::vector<ArgSpec> specs = op().arg_specs(p);
  std::vector<std::vector<int64_t>> shapes, in_shapes;
  std::vector<DType> dtypes, in_dtypes;
  std::vector<int> outs = op().outputs(p);
  for (size_t i = 0; i < specs.size(); ++i) {
    shapes.push_back(specs[i].shape);
    dtypes.push_back(specs[i].dtype);
    if (!std::count(outs.begin(), outs.end(), static_cast<int>(i))) {
      in_shapes.push_back(specs[i].shape);
      in_dtypes.push_back(specs[i].dtype);
    }
  }
  // rope's start only says which positions make_args writes; the tensors carry them.
  std::map<std::string, std::string> options;
  Problem want = op().tuning_problem(p);
  if (p.op == "rope") {
    options = {{"base", std::to_string(p.at("base"))}, {"scaling", p.options.at("scaling")}};
    want.shape["start"] = 0;
  }
  Problem got = op().problem_for(shapes, dtypes, options);
  EXPECT_EQ(got.shape_str(), want.shape_str());
  EXPECT_EQ(got.dtype, p.dtype);
  Problem from_inputs = op().problem_from_inputs(in_shapes, in_dtypes, options);
  EXPECT_EQ(from_inputs.shape_str(), want.shape_str());
}

TEST_P(LlamaOps, DefaultConfigsAreWithinTheKnobsOnEveryArch) {
  Problem p = problem();
  for (std::string arch : {"cpu", "sm_80", "sm_90a"}) {
    Config c = op().default_config(p, arch);
    EXPECT_NO_THROW(validate_knobs(op(), c, arch)) << arch << " " << config_str(c);
    EXPECT_NO_THROW(op().validate(p, c)) << arch << " " << config_str(c);
    EXPECT_NO_THROW(validate_knobs(op(), c, "cpu")) << "cpu takes " << arch << "'s configs";
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, LlamaOps, testing::ValuesIn(cases()), case_name);

TEST(LlamaOpsRegistry, TheThreeAreBuiltIn) {
  for (std::string name : {"rmsnorm", "swiglu", "rope"}) {
    EXPECT_EQ(find_operator(name).name(), name);
    EXPECT_EQ(operator_origin(name), "built-in");
    EXPECT_NE(find_operator(name).framework_name().find("eager PyTorch"), std::string::npos);
  }
}

TEST(LlamaOpsRegistry, LargeProblemsAreSampledOnTheInterpreter) {
  // Llama-3 prefill shapes over a small interpreter budget: a sample of
  // blocks runs and exactly their rows are compared.
  CheckOptions o;
  o.flop_budget = 1e6;
  for (auto [name, shape] :
       std::vector<std::pair<std::string, std::string>>{{"rmsnorm", "T=1024,H=4096,residual=1"},
                                                        {"swiglu", "T=512,I=14336"},
                                                        {"rope", "T=4096,H=32,Hkv=8,D=128"}}) {
    const Operator& op = find_operator(name);
    CheckResult r = check(op, op.parse(parse_kv(shape, "--shape"), DType::bf16), o);
    EXPECT_TRUE(r.passed) << to_json(r).dump();
    EXPECT_LT(r.blocks_run, r.blocks_total) << name;
    EXPECT_GT(r.checked, 0) << name;
  }
}

void expect_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << part << "'";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(LlamaOpsRegistry, TensorsThatDoNotFitAreNamed) {
  const Operator& rms = find_operator("rmsnorm");
  const DType b = DType::bf16;
  expect_error([&] { rms.problem_for({{4, 8}, {8}}, {b, b}, {}); }, "takes 3 tensors");
  expect_error(
      [&] {
        rms.problem_for({{4, 8}, {9}, {4, 8}}, {b, b, b}, {});
      },
      "tensor 'w' must be [H] = [8]");
  expect_error(
      [&] {
        rms.problem_for({{4, 8}, {4, 8}, {8}, {4, 9}, {4, 8}}, {b, b, b, b, b}, {});
      },
      "tensor 's' must be [T, H] = [4, 8]");
  expect_error(
      [&] {
        rms.problem_for({{4, 8}, {8}, {4, 8}}, {b, DType::f16, b}, {});
      },
      "tensor 'w' is f16 but x is bf16");
  expect_error(
      [&] {
        rms.problem_for({{2, 4, 8}, {8}, {2, 4, 8}}, {b, b, b}, {});
      },
      "x must be 2-d [T, H]");
  expect_error(
      [&] {
        rms.problem_for({{4, 8}, {8}, {4, 8}}, {b, b, b}, {{"residual", "1"}});
      },
      "residual=1 but 3 tensors were given");
  const Operator& sw = find_operator("swiglu");
  expect_error([&] { sw.problem_for({{4, 7}, {4, 3}}, {b, b}, {}); }, "an odd row length 7");
  expect_error(
      [&] {
        sw.problem_for({{4, 8}, {4, 8}}, {b, b}, {});
      },
      "tensor 'out' must be [T, I] = [4, 4]");
  expect_error([&] { sw.problem_from_inputs({{4, 8, 1}}, {b}, {}); }, "one 2-d input gu");
  const Operator& rope = find_operator("rope");
  const DType i = DType::i32;
  expect_error(
      [&] {
        rope.problem_for({{4, 8, 64}, {4, 2, 32}, {4}, {4, 8, 64}, {4, 2, 32}}, {b, b, i, b, b},
                         {});
      },
      "tensor 'k' must be [T, Hkv, D] = [4, Hkv, 64]");
  expect_error(
      [&] {
        rope.problem_for({{4, 8, 64}, {4, 2, 64}, {4}, {4, 8, 64}, {4, 2, 64}}, {b, b, b, b, b},
                         {});
      },
      "tensor 'pos' must be i32 [T] = [4]");
  expect_error(
      [&] {
        rope.problem_from_inputs({{4, 8, 64}, {4, 2, 64}, {4}}, {b, b, i}, {{"theta", "1"}});
      },
      "unknown option 'theta'");
}

} // namespace
