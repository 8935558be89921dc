// swiglu on the CPU: the interpreter agrees with the fp64 reference at odd shapes (T = 1, 7,
// 33; I = 14336, 1000, 77), every dtype, tiles that do not divide T or I; gates far out in
// both tails give silu's limits, not NaN; bad keys, dtypes and configs are rejected with a
// message naming them.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/Operator.h"
#include "ops/swiglu/SwiGlu.h"
#include "tilepilot/tilepilot.h"

using namespace tp;
using namespace tp::ops;

namespace {

Problem problem(int64_t T, int64_t I, DType dt = DType::bf16) {
  return swiglu::parse({{"T", std::to_string(T)}, {"I", std::to_string(I)}}, dt);
}

void run(const Problem& p, const Config& c, std::vector<HostTensor>& a) {
  interpret(swiglu::build(p, c), {&a[0], &a[1]});
}

/// The largest |got - want| - (atol + rtol |want|) (> 0: a failure); NaN anywhere fails.
double excess(const HostTensor& got, const std::vector<double>& want, double atol, double rtol) {
  double worst = -1;
  for (size_t i = 0; i < want.size(); ++i) {
    double g = got.get(static_cast<int64_t>(i));
    if (!std::isfinite(g)) return INFINITY;
    worst = std::max(worst, std::fabs(g - want[i]) - (atol + rtol * std::fabs(want[i])));
  }
  return worst;
}

double rtol_of(DType t) {
  return t == DType::f32 ? 1e-5 : t == DType::f16 ? 2e-3 : 8e-3; // one rounding of the output
}

struct Case {
  int64_t T, I;
  DType dtype;
  Config config; // empty: the default
};

class SwiGluInterpreter : public testing::TestWithParam<Case> {};

TEST_P(SwiGluInterpreter, AgreesWithFp64Reference) {
  const Case& c = GetParam();
  Problem p = problem(c.T, c.I, c.dtype);
  std::vector<HostTensor> a = swiglu::make_args(p, 42);
  run(p, c.config.empty() ? swiglu::default_config(p, "cpu") : c.config, a);
  EXPECT_LE(excess(a[1], swiglu::reference(p, a, 0, c.T, 0, c.I), 1e-6, rtol_of(c.dtype)), 0)
      << p.shape_str() << " " << dtype_name(c.dtype);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (DType t : {DType::bf16, DType::f16, DType::f32})
    for (int64_t T : {1, 7, 33})
      for (int64_t I : {1000, 77})
        out.push_back({T, I, t, {}});
  out.push_back({7, 14336, DType::bf16, {}});
  out.push_back({1, 14336, DType::bf16, {}});
  // Tiles over both dimensions with partial last tiles; the GPU defaults (decode and prefill).
  out.push_back({33, 1000, DType::bf16, {{"bm", 4}, {"bn", 96}, {"threads", 32}}});
  out.push_back({5, 300, DType::f16, {{"bm", 1}, {"bn", 256}, {"threads", 32}}});
  out.push_back({9, 700, DType::bf16, {{"bm", 4}, {"bn", 512}, {"threads", 256}}});
  return out;
}

std::string case_name(const testing::TestParamInfo<Case>& i) {
  const Case& c = i.param;
  return "T" + std::to_string(c.T) + "_I" + std::to_string(c.I) + "_" + dtype_name(c.dtype) + "_" +
         std::to_string(i.index);
}

INSTANTIATE_TEST_SUITE_P(OddShapes, SwiGluInterpreter, testing::ValuesIn(cases()), case_name);

TEST(SwiGlu, TailsOfTheGateGiveSilusLimits) {
  // silu(g) -> 0 as g -> -inf (exp(-g) overflows to inf: 1 / (1 + inf) = 0, times g is -0)
  // and -> g as g -> +inf: finite outputs at gates of +-100 and +-16384
  // (bf16 holds both exactly).
  Problem p = problem(1, 4, DType::bf16);
  std::vector<HostTensor> a = swiglu::make_args(p, 1);
  const double gates[] = {-16384, -100, 100, 16384};
  for (int j = 0; j < 4; ++j) {
    a[0].set(j, gates[j]);
    a[0].set(4 + j, 0.5); // up
  }
  run(p, swiglu::default_config(p, "cpu"), a);
  EXPECT_EQ(a[1].get(0), 0.0);
  EXPECT_NEAR(a[1].get(1), 0.0, 1e-30);
  EXPECT_EQ(a[1].get(2), 50.0);
  EXPECT_EQ(a[1].get(3), 8192.0);
}

TEST(SwiGlu, GateAndUpComeFromTheirHalves) {
  // gate = 0 gives silu = 0 whatever up holds; gate = 10 gives ~10 * up: swapping the halves
  // of the row would show.
  Problem p = problem(2, 3, DType::f32);
  std::vector<HostTensor> a = swiglu::make_args(p, 1);
  for (int64_t t = 0; t < 2; ++t)
    for (int64_t j = 0; j < 3; ++j) {
      a[0].set(t * 6 + j, t == 0 ? 0.0 : 10.0);
      a[0].set(t * 6 + 3 + j, 1.0 + j);
    }
  run(p, swiglu::default_config(p, "cpu"), a);
  for (int64_t j = 0; j < 3; ++j) {
    EXPECT_EQ(a[1].get(j), 0.0);
    EXPECT_NEAR(a[1].get(3 + j), 10.0 / (1 + std::exp(-10.0)) * (1.0 + j), 1e-5);
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

TEST(SwiGlu, BadInputIsRejectedWithItsName) {
  expect_error([] { swiglu::parse({{"T", "4"}}, DType::bf16); }, "missing I");
  expect_error(
      [] {
        swiglu::parse({{"T", "4"}, {"I", "-3"}}, DType::bf16);
      },
      "I=-3 is not a positive integer");
  expect_error(
      [] {
        swiglu::parse({{"T", "4"}, {"I", "8"}, {"H", "1"}}, DType::bf16);
      },
      "unknown shape key 'H'");
  expect_error(
      [] {
        swiglu::parse({{"T", "4"}, {"I", "8"}}, DType::i32);
      },
      "dtype i32 is not supported");
  expect_error(
      [] {
        swiglu::parse({{"T", "4"}, {"I", "1500000000"}}, DType::bf16);
      },
      "longer than a kernel indexes");
  Problem p = problem(4, 1000);
  const Operator& op = find_operator("swiglu");
  expect_error([&] { check_config(op, p, {{"bm", 1}, {"bn", 256}}, "cpu"); }, "is missing threads");
  expect_error(
      [&] {
        check_config(op, p, {{"bm", 65}, {"bn", 256}, {"threads", 128}}, "cpu");
      },
      "bm=65 is out of range; bm takes [1, 64]");
  expect_error(
      [&] {
        swiglu::validate(p, {{"bm", 8}, {"bn", 1024}, {"threads", 128}});
      },
      "64 elements per thread, more than 32");
}

} // namespace
