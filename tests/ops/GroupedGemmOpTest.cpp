// grouped_gemm on the CPU: the interpreter agrees with the fp64 reference over the whole grid
// at ragged routings (E=4 with counts 37, 0, 64, 5; one expert with every row; 64 small
// experts of a seeded routing), odd N and K, both layouts, bf16 and f16, the interpreter's and
// the GPU's default tiles; offs that give no expert a row (or stop short of R) leave those
// rows unwritten, so blocks with no work store nothing; block_outputs tiles exactly the
// experts' rows; run_host_framework follows the offs it is given; bad keys, tensors, offs and
// configs are user errors that name them.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "ops/Check.h"
#include "ops/grouped_gemm/GroupedGemm.h"
#include "tilepilot/tilepilot.h"

using namespace tp;
using namespace tp::ops;

namespace {

namespace gg = grouped_gemm;

const Operator& op() {
  return find_operator("grouped_gemm");
}

Problem problem(const std::string& shape, DType dt = DType::bf16) {
  return op().parse(parse_kv(shape, "--shape"), dt);
}

void run(const Problem& p, const Config& c, std::vector<HostTensor>& a) {
  interpret(op().build(p, c), {&a[0], &a[1], &a[2], &a[3]});
}

/// Elements of C off the fp64 reference (NaN anywhere counts: C starts poisoned).
int64_t bad_elements(const Problem& p, const std::vector<HostTensor>& a, std::string* first) {
  const int64_t R = p.at("R"), N = p.at("N");
  const std::vector<double> want = gg::reference(p, a, 0, R, 0, N);
  const double rtol = p.dtype == DType::f16 ? 2e-3 : 8e-3; // one rounding of C
  int64_t bad = 0;
  for (int64_t i = 0; i < R * N; ++i) {
    const double got = a[3].get(i);
    if (!(std::fabs(got - want[i]) <= 1e-3 + rtol * std::fabs(want[i])) && bad++ == 0)
      *first = "C[" + std::to_string(i / N) + ", " + std::to_string(i % N) +
               "] = " + std::to_string(got) + ", expected " + std::to_string(want[i]);
  }
  return bad;
}

struct Case {
  std::string shape;
  DType dtype;
  Config config; // empty: the interpreter's default
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.shape << " " << dtype_name(c.dtype) << " " << config_str(c.config);
}

class GroupedGemmInterpreter : public testing::TestWithParam<Case> {};

TEST_P(GroupedGemmInterpreter, EveryRowAgreesWithFp64Reference) {
  const Case& c = GetParam();
  Problem p = problem(c.shape, c.dtype);
  std::vector<HostTensor> a = op().make_args(p, 7);
  run(p, c.config.empty() ? op().default_config(p, "cpu") : c.config, a);
  std::string first;
  EXPECT_EQ(bad_elements(p, a, &first), 0) << first;
}

std::vector<Case> cases() {
  const DType b = DType::bf16, h = DType::f16;
  const Config sm90_small = {{"bm", 64}, {"bn", 128}, {"bk", 64}, {"stages", 4}, {"threads", 128}};
  const Config sm90_large = {{"bm", 128}, {"bn", 256}, {"bk", 64}, {"stages", 4}, {"threads", 256}};
  const Config tiny = {{"bm", 16}, {"bn", 16}, {"bk", 16}, {"stages", 1}, {"threads", 32}};
  return {{"E=4,R=106,N=45,K=133,counts=37:0:64:5", b, {}},
          {"E=4,R=106,N=45,K=133,counts=37:0:64:5,layout=nn", b, {}},
          {"E=4,R=106,N=45,K=133,counts=37:0:64:5", h, tiny},
          {"E=4,R=106,N=45,K=133,counts=37:0:64:5,layout=nn", h, sm90_small},
          {"E=4,R=300,N=77,K=65,counts=0:0:300:0", b, {}}, // one expert has every row
          {"E=4,R=300,N=77,K=65,counts=0:0:300:0", b, sm90_large},
          {"E=64,R=96,N=40,K=48", b, {}}, // DeepSeek-like: many small experts, most empty
          {"E=64,R=96,N=40,K=48", b, tiny},
          {"E=8,R=257,N=33,K=31,layout=nn", h, {}},
          {"E=1,R=1,N=17,K=16", b, {}}};
}

std::string case_name(const testing::TestParamInfo<Case>& i) {
  std::string n = i.param.shape + "_" + dtype_name(i.param.dtype) + "_" + std::to_string(i.index);
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Routings, GroupedGemmInterpreter, testing::ValuesIn(cases()), case_name);

// Every expert empty: every block is past the (empty) tile list and none may store.
TEST(GroupedGemm, AllZeroCountsStoreNothing) {
  Problem p = problem("E=4,R=40,N=33,K=20");
  std::vector<HostTensor> a = op().make_args(p, 3);
  for (int64_t e = 0; e < 4; ++e)
    a[2].set(e, 0);
  run(p, op().default_config(p, "cpu"), a);
  for (int64_t i = 0; i < a[3].numel(); ++i)
    ASSERT_TRUE(std::isnan(a[3].get(i))) << "C flat " << i << " was written";
}

// offs ending before R: the experts' rows are right, the rows no expert owns are not stored.
TEST(GroupedGemm, RowsPastTheLastOffsetAreNotStored) {
  Problem p = problem("E=3,R=70,N=20,K=24");
  std::vector<HostTensor> a = op().make_args(p, 4);
  const int64_t ends[] = {10, 10, 41};
  for (int64_t e = 0; e < 3; ++e)
    a[2].set(e, static_cast<double>(ends[e]));
  run(p, op().default_config(p, "cpu"), a);
  const std::vector<double> want = gg::reference(p, a, 0, 41, 0, 20);
  for (int64_t i = 0; i < 41 * 20; ++i)
    EXPECT_NEAR(a[3].get(i), want[i], 1e-3 + 8e-3 * std::fabs(want[i])) << "flat " << i;
  for (int64_t i = 41 * 20; i < a[3].numel(); ++i)
    ASSERT_TRUE(std::isnan(a[3].get(i))) << "row " << i / 20 << " has no expert";
}

// The boxes of all blocks cover each of the experts' rows x N exactly once, and nothing else.
TEST(GroupedGemm, BlockOutputsTileTheExpertsRowsOnce) {
  for (const char* s : {"E=4,R=106,N=45,K=8,counts=37:0:64:5", "E=64,R=500,N=300,K=8"}) {
    Problem p = problem(s);
    for (const char* arch : {"cpu", "sm_90a", "sm_80"}) {
      const Config c = op().default_config(p, arch);
      const std::array<int64_t, 3> g = op().grid(p, c);
      std::vector<int> hits(p.at("R") * p.at("N"), 0);
      for (int64_t y = 0; y < g[1]; ++y)
        for (int64_t x = 0; x < g[0]; ++x)
          for (const Box& b : op().block_outputs(p, c, {x, y, 0}))
            for (int64_t r = b.min[0]; r < b.min[0] + b.extent[0]; ++r)
              for (int64_t n = b.min[1]; n < b.min[1] + b.extent[1]; ++n)
                ++hits[r * p.at("N") + n];
      EXPECT_TRUE(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }))
          << s << " " << arch;
      EXPECT_EQ(g[1], gg::max_tiles(p.at("E"), p.at("R"), c.at("bm")));
      EXPECT_GE(g[1], static_cast<int64_t>(gg::row_tiles(gg::counts(p), c.at("bm")).size()));
    }
  }
}

// The default routing: E counts summing to R, some experts empty, the same on every call, and
// make_args' offs are their running sums.
TEST(GroupedGemm, DefaultRoutingIsRaggedWithEmptyExperts) {
  for (const char* s : {"E=8,R=8192,N=16,K=16", "E=64,R=384,N=16,K=16", "E=2,R=3,N=16,K=16"}) {
    Problem p = problem(s);
    const std::vector<int64_t> n = gg::counts(p);
    ASSERT_EQ(static_cast<int64_t>(n.size()), p.at("E"));
    EXPECT_EQ(std::accumulate(n.begin(), n.end(), int64_t{0}), p.at("R")) << s;
    EXPECT_GT(std::count(n.begin(), n.end(), 0), 0) << s;
    EXPECT_EQ(n, gg::counts(problem(s)));
    std::vector<HostTensor> a = op().make_args(p, 1);
    int64_t end = 0;
    for (size_t e = 0; e < n.size(); ++e)
      EXPECT_EQ(a[2].get(static_cast<int64_t>(e)), static_cast<double>(end += n[e]));
  }
  const std::vector<int64_t> big = gg::counts(problem("E=8,R=8192,N=16,K=16"));
  EXPECT_NE(*std::max_element(big.begin(), big.end()), *std::min_element(big.begin(), big.end()));
}

// The experts make_args gives no rows have NaN weights, so a kernel that reads them fails; the
// others are finite values in [-1, 1).
TEST(GroupedGemm, EmptyExpertsWeightsArePoisoned) {
  for (const char* s :
       {"E=4,R=106,N=45,K=133,counts=37:0:64:5", "E=4,R=106,N=45,K=133,counts=37:0:64:5,layout=nn"})
    for (DType t : {DType::bf16, DType::f16}) {
      Problem p = problem(s, t);
      std::vector<HostTensor> a = op().make_args(p, 1);
      const int64_t per = a[1].numel() / 4;
      for (int64_t e = 0; e < 4; ++e)
        for (int64_t i = 0; i < per; i += 7) {
          const double w = a[1].get(e * per + i);
          if (e == 1)
            ASSERT_TRUE(std::isnan(w)) << s << " expert 1 element " << i;
          else
            ASSERT_TRUE(w >= -1 && w < 1) << s << " expert " << e << " element " << i << " = " << w;
        }
    }
}

// The operator's check (sampled blocks of a Mixtral-sized grid) passes through the registry,
// and fails when the reference is given other offs than the kernel ran with.
TEST(GroupedGemm, CheckPassesAndSeesWrongOffsets) {
  CheckOptions o;
  CheckResult r = check(op(), problem("E=8,R=2048,N=1024,K=256"), o);
  EXPECT_TRUE(r.passed) << to_json(r).dump();
  EXPECT_LT(r.blocks_run, r.blocks_total);

  Problem p = problem("E=4,R=106,N=45,K=133,counts=37:0:64:5");
  std::vector<HostTensor> a = op().make_args(p, 5);
  run(p, op().default_config(p, "cpu"), a);
  a[2].set(0, 36); // expert 0 ends one row early: row 36 belongs to expert 2 now
  std::string first;
  EXPECT_GT(bad_elements(p, a, &first), 0);
}

// The host framework (dispatch on host tensors) reads the offs it is given, not the problem's
// routing: a problem made from tensors.
TEST(GroupedGemm, HostFrameworkFollowsTheGivenOffsets) {
  Problem p = op().problem_for({{50, 24}, {3, 20, 24}, {3}, {50, 20}},
                               {DType::bf16, DType::bf16, DType::i32, DType::bf16}, {});
  EXPECT_EQ(p.options.at("counts"), "runtime");
  EXPECT_EQ(p.options.at("layout"), "nt");
  std::vector<HostTensor> a = op().make_args(p, 2);
  a[1].fill_random(9); // make_args' NaN weights are for the experts its own routing leaves empty
  const int64_t ends[] = {0, 49, 50};
  for (int64_t e = 0; e < 3; ++e)
    a[2].set(e, static_cast<double>(ends[e]));
  std::vector<HostTensor> want = a;
  run(p, op().default_config(p, "cpu"), want);
  op().run_host_framework(p, a);
  for (int64_t i = 0; i < a[3].numel(); ++i)
    EXPECT_NEAR(a[3].get(i), want[3].get(i), 1e-2 + 1e-2 * std::fabs(want[3].get(i))) << i;
}

TEST(GroupedGemm, TuningKeysDropTheRouting) {
  Problem p = problem("E=4,R=106,N=45,K=133,counts=37:0:64:5");
  Problem t = op().tuning_problem(p);
  EXPECT_EQ(t.options.count("counts"), 0u);
  EXPECT_EQ(t.shape, p.shape);
  EXPECT_EQ(op().exact_keys(), (std::set<std::string>{"E", "layout"}));
}

TEST(GroupedGemm, ProblemFromInputsAddsC) {
  Problem p = op().problem_from_inputs({{12, 64}, {5, 64, 96}, {5}},
                                       {DType::f16, DType::f16, DType::i32}, {{"layout", "nn"}});
  EXPECT_EQ(p.at("E"), 5);
  EXPECT_EQ(p.at("R"), 12);
  EXPECT_EQ(p.at("N"), 96);
  EXPECT_EQ(p.at("K"), 64);
  EXPECT_EQ(p.dtype, DType::f16);
}

void expect_user_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected a user error containing '" << needle << "'";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(GroupedGemm, BadKeysAreUserErrorsNamingThem) {
  expect_user_error([] { problem("E=4,R=10,N=8"); }, "missing K");
  expect_user_error([] { problem("E=0,R=10,N=8,K=8"); }, "E=0 is not a positive integer");
  expect_user_error([] { problem("E=257,R=10,N=8,K=8"); }, "more than 256 experts");
  expect_user_error([] { problem("E=2,R=10,N=8,K=8,layout=tn"); }, "layout=tn is not supported");
  expect_user_error([] { problem("E=2,R=10,N=8,K=8", DType::f32); }, "dtype f32");
  expect_user_error([] { problem("E=2,R=10,N=8,K=8,counts=4:5:1"); }, "3 entries but E=2");
  expect_user_error([] { problem("E=2,R=10,N=8,K=8,counts=4:5"); }, "sum to 9 but R=10");
  expect_user_error([] { problem("E=2,R=10,N=8,K=8,counts=4:x"); }, "counts entry 'x'");
  expect_user_error([] { problem("E=2,R=10,N=8,K=8,counts=-1:11"); }, "counts entry '-1'");
  expect_user_error([] { problem("E=2,R=10,N=8,K=8,M=3"); }, "M");
}

TEST(GroupedGemm, BadTensorsAreUserErrorsNamingThem) {
  const std::vector<DType> t = {DType::bf16, DType::bf16, DType::i32, DType::bf16};
  expect_user_error([&] { op().problem_for({{50, 24}, {3, 20, 24}, {3}}, t, {}); }, "4 tensors");
  expect_user_error(
      [&] {
        op().problem_for({{50, 24}, {3, 20, 25}, {3}, {50, 20}}, t, {});
      },
      "B must be [E, N, K=24]");
  expect_user_error(
      [&] {
        op().problem_for({{50, 24}, {3, 20, 24}, {4}, {50, 20}}, t, {});
      },
      "offs must be i32 [E=3]");
  expect_user_error(
      [&] {
        op().problem_for({{50, 24}, {3, 20, 24}, {3}, {50, 20}},
                         {DType::bf16, DType::bf16, DType::f32, DType::bf16}, {});
      },
      "offs must be i32");
  expect_user_error(
      [&] {
        op().problem_for({{50, 24}, {3, 20, 24}, {3}, {50, 21}}, t, {});
      },
      "C must be [R, N] = [50, 20]");
  expect_user_error(
      [&] {
        op().problem_for({{50, 24}, {3, 20, 24}, {3}, {50, 20}},
                         {DType::bf16, DType::f16, DType::i32, DType::bf16}, {});
      },
      "B is f16 but A is bf16");
  expect_user_error(
      [&] {
        op().problem_for({{50, 24}, {3, 20, 24}, {3}, {50, 20}}, t, {{"x", "1"}});
      },
      "only the option layout");
}

TEST(GroupedGemm, BadOffsetsAndConfigsAreUserErrors) {
  Problem p = problem("E=3,R=20,N=16,K=16");
  std::vector<HostTensor> a = op().make_args(p, 1);
  a[2].set(0, 12);
  a[2].set(1, 5);
  expect_user_error([&] { op().run_host_framework(p, a); }, "offs[1]=5 must lie in [offs[0]=12");
  a[2].set(1, 21);
  expect_user_error([&] { op().run_host_framework(p, a); }, "R=20");
  Config c = op().default_config(p, "cpu");
  c["bm"] = 40;
  expect_user_error([&] { check_config(op(), p, c, "cpu"); }, "bm takes a multiple of 16");
  c = op().default_config(p, "cpu");
  c.erase("bk");
  expect_user_error([&] { check_config(op(), p, c, "cpu"); }, "is missing bk");
}

} // namespace
