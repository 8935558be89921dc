// rmsnorm on the CPU: the interpreter agrees with the fp64 reference at odd shapes (T = 1, 7,
// 33; H = 4096, 1000, 300), with and without the residual, every dtype, partial blocks; the
// residual sum is returned exactly as rounded; a zero row gives zeros, not NaN; bad keys,
// dtypes and configs are rejected with a message naming them.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/IRVisitor.h"
#include "ops/Operator.h"
#include "ops/rmsnorm/RmsNorm.h"
#include "passes/InferLayouts.h"
#include "tilepilot/tilepilot.h"

using namespace tp;
using namespace tp::ops;

namespace {

Problem problem(int64_t T, int64_t H, int residual, DType dt = DType::bf16) {
  return rmsnorm::parse(
      {{"T", std::to_string(T)}, {"H", std::to_string(H)}, {"residual", std::to_string(residual)}},
      dt);
}

void run(const Problem& p, const Config& c, std::vector<HostTensor>& a) {
  std::vector<HostArg> args;
  for (HostTensor& t : a)
    args.emplace_back(&t);
  interpret(rmsnorm::build(p, c), args);
}

/// The largest |got - want| - (atol + rtol |want|) over the whole output (> 0: a failure);
/// NaN anywhere fails.
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
  int64_t T, H;
  int residual;
  DType dtype;
  Config config; // empty: the default
};

class RmsNormInterpreter : public testing::TestWithParam<Case> {};

TEST_P(RmsNormInterpreter, AgreesWithFp64Reference) {
  const Case& c = GetParam();
  Problem p = problem(c.T, c.H, c.residual, c.dtype);
  Config cfg = c.config.empty() ? rmsnorm::default_config(p, "cpu") : c.config;
  std::vector<HostTensor> a = rmsnorm::make_args(p, 42);
  run(p, cfg, a);
  for (int o : rmsnorm::outputs(p)) {
    std::vector<double> want = rmsnorm::reference(p, a, o, 0, c.T, 0, c.H);
    EXPECT_LE(excess(a[o], want, 1e-6, rtol_of(c.dtype)), 0)
        << "output " << o << " of " << p.shape_str() << " " << dtype_name(c.dtype);
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (DType t : {DType::bf16, DType::f16, DType::f32})
    for (int64_t T : {1, 7, 33})
      for (int64_t H : {4096, 1000})
        for (int r : {0, 1})
          out.push_back({T, H, r, t, {}});
  // Blocks of several rows whose last block is partial, and a block of one warp.
  out.push_back({7, 300, 1, DType::bf16, {{"rows", 4}, {"threads", 64}}});
  out.push_back({33, 300, 0, DType::f16, {{"rows", 2}, {"threads", 32}}});
  return out;
}

std::string case_name(const testing::TestParamInfo<Case>& i) {
  const Case& c = i.param;
  return "T" + std::to_string(c.T) + "_H" + std::to_string(c.H) + "_r" +
         std::to_string(c.residual) + "_" + dtype_name(c.dtype) + "_" + std::to_string(i.index);
}

INSTANTIATE_TEST_SUITE_P(OddShapes, RmsNormInterpreter, testing::ValuesIn(cases()), case_name);

TEST(RmsNorm, ResidualSumIsReturnedRoundedAndNormalisedAsRounded) {
  // s = x + r rounded once into bf16, bit for bit; y is the norm of that s (the reference
  // normalises the rounded s too, so a kernel normalising the unrounded sum would differ).
  Problem p = problem(5, 512, 1);
  std::vector<HostTensor> a = rmsnorm::make_args(p, 3);
  run(p, rmsnorm::default_config(p, "cpu"), a);
  for (int64_t i = 0; i < 5 * 512; ++i)
    ASSERT_EQ(a[3].get(i), round_to(DType::bf16, a[0].get(i) + a[1].get(i))) << "element " << i;
}

TEST(RmsNorm, ZeroRowGivesZerosNotNan) {
  // mean(0) + eps keeps rsqrt finite: a zero row normalises to zeros.
  Problem p = problem(3, 256, 0);
  std::vector<HostTensor> a = rmsnorm::make_args(p, 5);
  for (int64_t j = 0; j < 256; ++j)
    a[0].set(256 + j, 0.0); // row 1
  run(p, rmsnorm::default_config(p, "cpu"), a);
  for (int64_t j = 0; j < 256; ++j)
    ASSERT_EQ(a[2].get(256 + j), 0.0);
  EXPECT_LE(excess(a[2], rmsnorm::reference(p, a, 2, 0, 3, 0, 256), 1e-6, 8e-3), 0);
}

TEST(RmsNorm, ScaleOfTheRowCancels) {
  // rmsnorm(c x) = rmsnorm(x) up to eps: rows of magnitude 1e-1 and 1e3 (bf16 holds both
  // exactly as powers of two times the same mantissas) normalise alike.
  Problem p = problem(2, 1000, 0, DType::f32);
  std::vector<HostTensor> a = rmsnorm::make_args(p, 9);
  for (int64_t j = 0; j < 1000; ++j)
    a[0].set(1000 + j, a[0].get(j) * 1024.0);
  run(p, rmsnorm::default_config(p, "cpu"), a);
  for (int64_t j = 0; j < 1000; ++j)
    ASSERT_NEAR(a[2].get(1000 + j), a[2].get(j), 1e-4 * std::fabs(a[2].get(j)) + 1e-6);
}

void expect_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << part << "'";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(RmsNorm, BadInputIsRejectedWithItsName) {
  expect_error([] { rmsnorm::parse({{"H", "4096"}}, DType::bf16); }, "missing T");
  expect_error(
      [] {
        rmsnorm::parse({{"T", "4"}, {"H", "0"}}, DType::bf16);
      },
      "H=0 is not a positive integer");
  expect_error(
      [] {
        rmsnorm::parse({{"T", "4"}, {"H", "8"}, {"residual", "2"}}, DType::bf16);
      },
      "residual=2 is not 0 or 1");
  expect_error(
      [] {
        rmsnorm::parse({{"T", "4"}, {"H", "8"}, {"eps", "1"}}, DType::bf16);
      },
      "unknown shape key 'eps'");
  expect_error(
      [] {
        rmsnorm::parse({{"T", "4"}, {"H", "8"}}, DType::i8);
      },
      "dtype i8 is not supported");
  Problem p = problem(4, 8192, 0);
  const Operator& op = find_operator("rmsnorm");
  expect_error([&] { check_config(op, p, {{"rows", 1}}, "cpu"); }, "is missing threads");
  expect_error(
      [&] {
        check_config(op, p, {{"rows", 1}, {"threads", 100}}, "cpu");
      },
      "threads=100 is out of range; threads takes a multiple of 32 in [32, 1024]");
  expect_error(
      [&] {
        check_config(op, p, {{"rows", 0}, {"threads", 128}}, "cpu");
      },
      "rows=0 is out of range; rows takes [1, 16]");
  expect_error(
      [&] {
        rmsnorm::validate(p, {{"rows", 2}, {"threads", 128}});
      },
      "128 elements per thread, more than 64");
}

} // namespace

// The default's threads: a power of two, about 32 elements a thread once the rows fill every SM
// twice over (T >= kManyRows) and about 8 for fewer rows (decode), at least 128 and at most 1024
// a block, and never past what a thread may hold (validate). It need not divide the row's runs
// (5000, 5120, 7168 and 28672 leave a ragged last run block).
TEST(RmsNorm, DefaultThreadsFollowTheRowCount) {
  struct Want {
    int64_t T, H, threads;
    int residual = 0;
  };
  // Many rows: a power of two that divides the runs where the row fits 64 registers a thread
  // (5120: 128, 14336: 256, as measured fastest in call a1), else ragged (5000; 7168 and 28672
  // with the residual).
  for (Want w : {Want{8192, 8192, 256}, Want{4096, 4096, 128}, Want{rmsnorm::kManyRows, 5120, 128},
                 Want{4096, 6144, 256}, Want{4096, 7168, 128}, Want{4096, 7168, 256, 1},
                 Want{4096, 14336, 256}, Want{4096, 28672, 512}, Want{4096, 28672, 1024, 1},
                 Want{4096, 12288, 512}, Want{rmsnorm::kManyRows - 1, 8192, 1024},
                 Want{1, 4096, 512}, Want{1, 5120, 1024}, Want{1, 512, 128},
                 Want{16384, 65536, 1024}, Want{4096, 300, 128}, Want{4096, 5000, 256}}) {
    Problem p = problem(w.T, w.H, w.residual);
    Config c = rmsnorm::default_config(p, "sm_90a");
    EXPECT_EQ(c.at("threads"), w.threads) << "T=" << w.T << " H=" << w.H << " r=" << w.residual;
    EXPECT_EQ(c.at("rows"), 1);
    rmsnorm::validate(p, c);
  }
}

// The default keeps every fragment of the kernel in registers on sm_90a at the hidden sizes of
// common models and odd ones, with and without the residual, for prefill and decode row counts.
// (A first form of the many-row rule gave 5120, 6144, 7168 and 12288 thread counts that are not
// powers of two; the compiler then kept their rows in shared memory. Before ragged layouts the
// residual kernel at 7168, 14336 and 28672, and any H = 5000, kept rows there too.)
TEST(RmsNorm, DefaultKeepsTheRowsInRegisters) {
  // Odd sizes included (5000 = 625 runs of 8, 5001 not a whole run): their last run block is
  // ragged.
  for (int64_t H :
       {2048, 2560, 3072, 4096, 5000, 5001, 5120, 6144, 7168, 8192, 12288, 14336, 16384, 28672})
    for (int64_t T : {1, 4096})
      for (int residual : {0, 1}) {
        Problem p = problem(T, H, residual);
        const Operator& op = find_operator("rmsnorm");
        Kernel k = op.build(p, op.default_config(p, "sm_90a"));
        passes::LayoutInfo l = passes::infer_layouts(k.node(), passes::Target::parse("sm_90a"));
        ir::for_each_stmt(k.node().body, [&](const ir::Stmt& s) {
          if (const auto* a = ir::as<ir::Allocate>(s); a && a->buffer->scope == ir::Scope::fragment)
            EXPECT_TRUE(l.in_registers(a->buffer))
                << "H=" << H << " T=" << T << " residual=" << residual << ": " << a->buffer->name;
        });
      }
}
