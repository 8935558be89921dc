// gemm's split-K path on the CPU: the split then combine kernels agree with the fp64 reference
// on every element at odd shapes (M = 1 and 7, N = 45 and 130, K = 133 and 1000, each layout,
// 1..5 splits, more splits than K blocks) in bf16, f16 and f32, and an empty split stores
// exact zeros; splits = 1 and a config without the knob build the very same kernel (CUDA text
// on sm_90a with and without TMA, and sm_80); GemmOp::program's two steps, bindings and
// intermediate, which the estimate and the memory check count; the operator's check on the
// interpreter with choose_split's config; choose_split's rule, the default at M <= 64; bad configs
// rejected.
#include <gtest/gtest.h>

#include <cmath>

#include "codegen/cuda/LoweredKernel.h"
#include "compile/Lower.h"
#include "ops/Check.h"
#include "ops/MemoryCheck.h"
#include "ops/gemm/GemmGemv.h"
#include "ops/gemm/GemmOp.h"
#include "ops/gemm/GemmSplitK.h"
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

Config with_splits(int64_t splits, int64_t bn = 32) {
  return {{"bm", 64}, {"bn", bn}, {"bk", 32}, {"stages", 2}, {"threads", 128}, {"splits", splits}};
}

/// The operator's args (A, B, C) and the partials P; runs split then combine into C.
struct SplitRun {
  std::vector<HostTensor> args, parts;
};

SplitRun run_split_k(const Problem& p, const Config& c, uint64_t seed) {
  SplitRun r{op().make_args(p, seed), {}};
  for (const ArgSpec& s : splitk::split_intermediates(p, c)) {
    r.parts.emplace_back(s.dtype, s.shape);
    r.parts.back().poison();
  }
  interpret(splitk::build_split(p.dtype, p.options.at("layout"), c),
            {&r.args[0], &r.args[1], &r.parts[0]});
  interpret(splitk::build_combine(p.dtype, c), {&r.parts[0], &r.args[2]});
  return r;
}

struct Case {
  std::string shape;
  int64_t splits;
  DType dtype = DType::bf16;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.shape << " splits=" << c.splits << " " << dtype_name(c.dtype);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* layout : {"nn", "nt", "tn"})
    for (const char* mnk :
         {"M=1,N=45,K=133", "M=7,N=130,K=1000", "M=7,N=45,K=133", "M=1,N=130,K=1000"})
      for (int64_t s = 1; s <= 5; ++s)
        out.push_back({std::string(mnk) + ",layout=" + layout, s});
  // The other dtypes; K = 133 has 5 K blocks of 32, so 5 splits take one each.
  out.push_back({"M=7,N=130,K=133,layout=nt", 5, DType::f16});
  out.push_back({"M=7,N=45,K=1000,layout=tn", 3, DType::f32});
  // More splits than K blocks: 2 blocks of 32 for 5 and 16 splits, the trailing ones empty.
  out.push_back({"M=7,N=45,K=40,layout=nn", 5});
  out.push_back({"M=1,N=130,K=40,layout=nt", splitk::kMaxSplits});
  return out;
}

std::string case_name(const testing::TestParamInfo<Case>& i) {
  std::string n = i.param.shape + "_s" + std::to_string(i.param.splits) + dtype_name(i.param.dtype);
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

class GemmSplitK : public testing::TestWithParam<Case> {};

TEST_P(GemmSplitK, SplitThenCombineAgreesWithFp64ReferenceOnEveryElement) {
  const Case& k = GetParam();
  Problem p = problem(k.shape, k.dtype);
  Config c = with_splits(k.splits);
  SplitRun r = run_split_k(p, c, 5);
  const int64_t M = p.at("M"), N = p.at("N");
  std::vector<double> want = op().reference(p, r.args, {2, {0, 0}, {M, N}});
  auto [atol, rtol] = default_tolerance(op(), p);
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < M * N; ++i)
    if (!(std::fabs(r.args[2].get(i) - want[i]) <= atol + rtol * std::fabs(want[i])) && bad++ == 0)
      first = i;
  EXPECT_EQ(bad, 0) << "elements outside atol=" << atol << " rtol=" << rtol << ", the first at "
                    << first;
  // Splits past the last K block (split z starts at z ceil(nk / splits)) store exact zeros.
  const int64_t nk = (p.at("K") + 31) / 32, per = (nk + k.splits - 1) / k.splits;
  for (int64_t z = 0; z < k.splits; ++z) {
    if (z * per < nk) continue;
    int64_t nonzero = 0;
    for (int64_t i = 0; i < M * N; ++i)
      nonzero += r.parts[0].get(z * M * N + i) != 0.0;
    EXPECT_EQ(nonzero, 0) << "empty split " << z;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmSplitK, testing::ValuesIn(cases()), case_name);

std::string cuda_text(const Kernel& k, const std::string& arch, bool tma) {
  passes::Target t = passes::Target::parse(arch);
  t.allow_tma = tma;
  return cuda::lower_kernel(k, t).source;
}

TEST(GemmSplitKOne, OneSplitIsTheSingleKernelByteForByte) {
  // A release pinned before the knob existed has no splits: it must keep naming (and caching)
  // the kernel it was released with, and splits=1 must be that kernel too.
  for (const char* layout : {"nn", "nt", "tn"})
    for (DType dt : {DType::bf16, DType::f16}) {
      Problem p = problem(std::string("M=1,N=4096,K=4096,layout=") + layout, dt);
      Config plain = {{"bm", 64},    {"bn", 64},       {"bk", 64},
                      {"stages", 8}, {"threads", 128}, {"swizzle", 8}};
      Config one = plain;
      one["splits"] = 1;
      KernelProgram a = checked_program(op(), p, plain), b = checked_program(op(), p, one);
      ASSERT_EQ(a.steps.size(), 1u);
      ASSERT_EQ(b.steps.size(), 1u);
      EXPECT_TRUE(b.intermediates.empty());
      for (auto [arch, tma] : {std::pair{"sm_90a", true}, {"sm_90a", false}, {"sm_80", true}}) {
        SCOPED_TRACE(std::string(layout) + " " + dtype_name(dt) + " " + arch +
                     (tma ? "" : "-notma"));
        const std::string want = cuda_text(gemm_kernel(dt, layout, plain), arch, tma);
        EXPECT_EQ(cuda_text(a.steps[0].kernel, arch, tma), want);
        EXPECT_EQ(cuda_text(b.steps[0].kernel, arch, tma), want);
      }
    }
}

TEST(GemmSplitKProgram, SplitsMakeTwoStepsThroughOneIntermediate) {
  Problem p = problem("M=7,N=130,K=1000,layout=nt");
  Config c = with_splits(3);
  KernelProgram prog = checked_program(op(), p, c);
  ASSERT_EQ(prog.steps.size(), 2u);
  ASSERT_EQ(prog.intermediates.size(), 1u);
  EXPECT_EQ(prog.intermediates[0].dtype, DType::f32);
  EXPECT_EQ(prog.intermediates[0].shape, (std::vector<int64_t>{3, 7, 130}));
  // A, B -> split -> P (intermediate 0, bound as 3); P -> combine -> C (argument 2).
  EXPECT_EQ(prog.steps[0].args, (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(prog.steps[1].args, (std::vector<int>{3, 2}));
  EXPECT_EQ(prog.steps[0].kernel->name, "gemm_nt_split_s3");
  EXPECT_EQ(prog.steps[1].kernel->name, "gemm_combine_s3");
  // The grid of the last step is the combine's: 8 x 128 tiles of C.
  EXPECT_EQ(op().grid(p, c), (std::array<int64_t, 3>{2, 1, 1}));
  // The memory check counts P; the estimate lowers both steps (the split kernel's stages).
  EXPECT_EQ(intermediate_bytes(prog), 3.0 * 7 * 130 * 4);
  Config sm90 = {{"bm", 64}, {"bn", 64}, {"bk", 64}, {"stages", 8}, {"threads", 128}};
  Estimate single = op().estimate(p, sm90, "sm_90a");
  sm90["splits"] = 4;
  Estimate split = op().estimate(p, sm90, "sm_90a");
  EXPECT_GT(split.smem_bytes, 8 * (64 * 64 + 64 * 64) * 2 - 1);
  EXPECT_EQ(split.smem_bytes, single.smem_bytes);
  EXPECT_EQ(split.block_threads, single.block_threads);
}

TEST(GemmSplitKProgram, CheckPassesOnTheInterpreterWithTheDefaultSplit) {
  // M = 20, N = 1024, K = 1024 with the split choose_split makes for it runs the two kernels
  // (a decode shape), as do the odd ones with forced splits.
  struct Case {
    std::string shape;
    int64_t splits; // 0: choose_split's
  };
  for (const Case& k : std::vector<Case>{{"M=20,N=1024,K=1024,layout=nt", 0},
                                         {"M=7,N=130,K=1000,layout=nn", 4},
                                         {"M=3,N=45,K=133,layout=tn", 5}}) {
    Problem p = problem(k.shape);
    CheckOptions o;
    o.config = op().default_config(p, "cpu");
    if (k.splits) {
      o.config["splits"] = k.splits;
    } else {
      splitk::SplitChoice s = splitk::choose_split(p, 132);
      o.config["bn"] = s.bn;
      o.config["splits"] = s.splits;
    }
    ASSERT_GT(splitk::splits_of(o.config), 1) << k.shape;
    CheckResult r = check(op(), p, o);
    EXPECT_TRUE(r.passed) << config_str(o.config) << ": " << r.first_bad;
    EXPECT_EQ(r.checked, p.at("M") * p.at("N")) << k.shape;
  }
}

TEST(GemmSplitKConfig, BadSplitsAreAUserErrorNamingTheKnob) {
  Problem p = problem("M=32,N=4096,K=4096,layout=nt");
  Config c = splitk::split_config(splitk::choose_split(p, 132));
  auto rejected = [&](const Config& bad, const std::string& word) {
    try {
      check_config(op(), p, bad, "sm_90a");
      ADD_FAILURE() << config_str(bad) << " accepted";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  };
  Config c17 = c;
  c17["splits"] = splitk::kMaxSplits + 1;
  rejected(c17, "splits");
  Config c0 = c;
  c0["splits"] = 0;
  rejected(c0, "splits");
  Config cl = c;
  cl["cluster"] = 2;
  rejected(cl, "cluster");
  Config ps = c;
  ps["persistent"] = 1;
  rejected(ps, "persistent");
  // splits=1 takes them as before.
  cl["splits"] = 1;
  check_config(op(), p, cl, "sm_90a");
}

// --- the default rule -------------------------------------------------------------------------

constexpr int kH200Sms = 132;

splitk::SplitChoice choice(const std::string& shape) {
  return splitk::choose_split(problem(shape), kH200Sms);
}

TEST(GemmSplitKDefault, AtSixteenRowsOrFewerLayoutNtWithShortKRunsUnsplit) {
  // The H100's side by side runs (r2, r3): unsplit in layout nt with K <= 4096 at M <= 16, 96
  // columns where ceil(N / 96) tiles fit one wave, else 128.
  for (const char* shape : {"M=1,N=4096,K=4096,layout=nt", "M=7,N=6144,K=4096,layout=nt",
                            "M=16,N=4096,K=1000,layout=nt", "M=2,N=1024,K=4096,layout=nt"}) {
    splitk::SplitChoice s = choice(shape);
    EXPECT_EQ(s.bn, 96) << shape;
    EXPECT_EQ(s.splits, 1) << shape;
  }
  splitk::SplitChoice wide = choice("M=8,N=14336,K=4096,layout=nt"); // 150 tiles of 96 > 132
  EXPECT_EQ(wide.bn, 128);
  EXPECT_EQ(wide.splits, 1);
  // A long K, layout nn and layout tn kept the split rule (r3: the unsplit tiles lost there).
  for (const char* shape : {"M=4,N=4096,K=14336,layout=nt", "M=4,N=4096,K=4096,layout=nn",
                            "M=7,N=6144,K=4096,layout=tn"}) {
    EXPECT_EQ(choice(shape).bn, 128) << shape;
    EXPECT_GT(choice(shape).splits, 1) << shape;
  }
}

TEST(GemmSplitKDefault, TheMeasuredDecodeShapesSplitToFillTheSms) {
  // M=32, N=4096: 64 tiles of 64 columns (more rows: 64 wide ran faster), 2 splits.
  splitk::SplitChoice c = choice("M=32,N=4096,K=4096");
  EXPECT_EQ(c.bn, 64);
  EXPECT_EQ(c.splits, 2);
  // Small N: 16 tiles of 64 could take 8 splits; the rule stops at 4.
  splitk::SplitChoice d = choice("M=32,N=1024,K=4096");
  EXPECT_EQ(d.bn, 64);
  EXPECT_EQ(d.splits, 4);
  // A long K keeps 2 splits of 112 K steps.
  EXPECT_EQ(choice("M=32,N=4096,K=14336").splits, 2);
  // 12 K steps: one split of 8 would leave 4 for the other; 8 steps at least, so 1 split.
  EXPECT_EQ(choice("M=32,N=4096,K=768").splits, 1);
  EXPECT_EQ(choice("M=32,N=4096,K=1024").splits, 2); // 16 K steps: two splits of 8
}

TEST(GemmSplitKDefault, NoSplitWhereItCannotPay) {
  EXPECT_EQ(choice("M=65,N=4096,K=4096").splits, 1); // two block rows: not decode
  EXPECT_EQ(choice("M=1,N=4096,K=448").splits, 1);   // 7 K steps: no two splits of 8
  EXPECT_EQ(choice("M=1,N=28672,K=4096").splits, 1); // 224 tiles of 128 already fill
  EXPECT_EQ(choice("M=1,N=14336,K=4096").splits, 1); // 112 tiles of 128: one wave
  // 264 tiles of 64 would be two waves: 128 columns, 132 tiles, unsplit.
  splitk::SplitChoice wide = choice("M=64,N=16896,K=4096");
  EXPECT_EQ(wide.bn, 128);
  EXPECT_EQ(wide.splits, 1);
  // Unsplit, the default has no splits key at all (the one kernel, cached as before); above
  // one block row it is sm90_default's.
  for (const char* shape : {"M=65,N=4096,K=4096", "M=1,N=4096,K=448", "M=1,N=28672,K=4096",
                            "M=128,N=128,K=128", "M=4096,N=4096,K=4096"})
    EXPECT_EQ(op().default_config(problem(shape), "sm_90a").count("splits"), 0u) << shape;
  EXPECT_EQ(op().default_config(problem("M=65,N=4096,K=4096"), "sm_90a").count("swizzle"), 1u);
}

TEST(GemmSplitKDefault, EverySplitKeepsEightKStepsAndNoneIsEmpty) {
  for (int64_t M : {1, 2, 7, 16, 33, 64})
    for (int64_t N : {1, 45, 256, 1024, 2048, 4096, 6144, 8192, 14336, 28672})
      for (int64_t K : {64, 255, 256, 512, 1000, 4096, 14336, 65536}) {
        Problem p = problem("M=" + std::to_string(M) + ",N=" + std::to_string(N) +
                            ",K=" + std::to_string(K));
        splitk::SplitChoice s = splitk::choose_split(p, kH200Sms);
        SCOPED_TRACE(p.shape_str());
        const int64_t nk = (K + 63) / 64, per = (nk + s.splits - 1) / s.splits;
        EXPECT_GE(s.splits, 1);
        EXPECT_LE(s.splits, 4);
        EXPECT_TRUE(s.bn == 64 || s.bn == 96 || s.bn == 128) << s.bn;
        // The operator's sm_90a default at one block row is the choice's config, valid; at
        // M <= 2 the nn GEMV instead while its 32-column blocks are one a SM or fewer.
        Config c = op().default_config(p, "sm_90a");
        if (M <= 2 && (N + 31) / 32 <= kH200Sms) {
          Config g = gemv::gemv_config_nn();
          g["gemv"] = M;
          EXPECT_EQ(c, g);
        } else {
          EXPECT_EQ(c, splitk::split_config(s));
        }
        EXPECT_NO_THROW(check_config(op(), p, c, "sm_90a"));
        if (s.splits == 1) continue;
        EXPECT_GE(per, 8) << s.splits << " splits";
        EXPECT_LT((s.splits - 1) * per, nk) << "an empty split";
        // Splitting only where the tiles alone leave SMs idle: at most one wave in all.
        EXPECT_LE((N + s.bn - 1) / s.bn * s.splits, kH200Sms);
      }
}

TEST(GemmSplitKDefault, AnSmCountBelowOneIsAUserError) {
  EXPECT_THROW(splitk::choose_split(problem("M=1,N=4096,K=4096"), 0), UserError);
}

} // namespace
