// gemm's GEMV path (gemv=1, ops/gemm/GemmGemv.h) on the CPU: it agrees with the fp64
// reference on every element at odd shapes (N and K not multiples of the tile, one element,
// K shorter than a step) in bf16, f16 and f32, in layouts nt and nn; its plan on sm_90a is a
// cp.async pipeline of register fragments staged through shared memory, with no TMA and no producer
// warps; configs it cannot run are user errors naming why.
#include <gtest/gtest.h>

#include "codegen/cuda/LoweredKernel.h"
#include "compile/Lower.h"
#include "ops/Check.h"
#include "ops/gemm/GemmGemv.h"
#include "ops/gemm/GemmOp.h"
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

Config gemv_config(int64_t bn, int64_t bk, int64_t stages, int64_t rows = 1) {
  return {{"gemv", rows},     {"bm", 64},       {"bn", bn},   {"bk", bk},
          {"stages", stages}, {"threads", 256}, {"splits", 1}};
}

} // namespace

TEST(GemmGemv, AgreesWithFp64ReferenceOnEveryElementAtOddShapes) {
  struct Case {
    std::string shape;
    DType dtype;
    Config config;
  };
  const std::vector<Case> cases = {
      {"M=1,N=77,K=333", DType::bf16, gemv_config(16, 256, 3)},   // tails in N and K
      {"M=1,N=130,K=1000", DType::bf16, gemv_config(32, 128, 4)}, // K: 7 steps and a tail
      {"M=1,N=1,K=1", DType::bf16, gemv_config(16, 256, 3)},      // one element
      {"M=1,N=45,K=40", DType::f16, gemv_config(32, 256, 2)},     // K shorter than a step
      {"M=1,N=64,K=512", DType::f32, gemv_config(16, 128, 3)},    // whole tiles, f32
      // Several rows a block: the last block row partly past M, rows of one block, and more
      // rows than M (the rest read zeros and are not stored).
      {"M=3,N=77,K=333", DType::bf16, gemv_config(16, 256, 3, 2)},
      {"M=4,N=130,K=1000", DType::bf16, gemv_config(32, 128, 4, 4)},
      {"M=5,N=45,K=40", DType::f16, gemv_config(16, 128, 2, 8)},
  };
  for (const std::string layout : {"nt", "nn"})
    for (const Case& k : cases) {
      SCOPED_TRACE(k.shape + " " + dtype_name(k.dtype) + " " + layout);
      Problem p = problem(k.shape + ",layout=" + layout, k.dtype);
      CheckOptions o;
      o.config = k.config;
      CheckResult r = check(op(), p, o);
      EXPECT_TRUE(r.passed) << config_str(o.config) << ": " << r.first_bad;
      EXPECT_EQ(r.checked, p.at("M") * p.at("N"));
    }
}

TEST(GemmGemv, Sm90PlanIsACpAsyncPipelineOfStagedFragments) {
  Problem p = problem("M=1,N=4096,K=4096,layout=nt");
  const Config c = gemv_config(16, 256, 3);
  KernelProgram prog = checked_program(op(), p, c);
  ASSERT_EQ(prog.steps.size(), 1u);
  EXPECT_EQ(prog.steps[0].kernel->name, "gemv_nt_r1");
  cuda::LoweredKernel lk =
      cuda::lower_kernel(prog.steps[0].kernel, passes::Target::parse("sm_90a"));
  // B's 16 x 256 tile and A's 256-element slice (its 512 bytes in a 1024-aligned slot),
  // staged in 3 buffers each, and nothing else: the fragments live in registers, and no TMA
  // map or producer warpgroup is made.
  EXPECT_EQ(lk.smem_bytes, 3 * (16 * 256 * 2 + 1024));
  EXPECT_TRUE(lk.tmas.empty());
  EXPECT_EQ(lk.block_threads, 256);
  EXPECT_FALSE(lk.persistent);
  // The grid: one block per 16 outputs.
  EXPECT_EQ(op().grid(p, c), (std::array<int64_t, 3>{256, 1, 1}));
  // With two rows a block: a block row per two rows of A, one staged slice of A per row.
  Problem p5 = problem("M=5,N=4096,K=4096,layout=nt");
  const Config c2 = gemv_config(16, 256, 3, 2);
  EXPECT_EQ(op().grid(p5, c2), (std::array<int64_t, 3>{256, 3, 1}));
  cuda::LoweredKernel lk2 = cuda::lower_kernel(checked_program(op(), p5, c2).steps[0].kernel,
                                               passes::Target::parse("sm_90a"));
  EXPECT_EQ(lk2.smem_bytes, 3 * (16 * 256 * 2 + 2 * 1024));
}

TEST(GemmGemv, NnPlanReadsRowsOfBAndSumsAcrossWarpsOnce) {
  // Layout nn: B is [K, N], a block's tile is bk rows of bn columns, each row a 16-byte run per
  // thread. K runs down the tile, across the block's warps, so the one reduction after the loop
  // goes through shared memory (8 KiB of f32 for 256 threads' 8 partials); the loop itself is
  // the same cp.async pipeline as nt's.
  Problem p = problem("M=1,N=4096,K=4096,layout=nn");
  const Config c = gemv::gemv_config_nn();
  KernelProgram prog = checked_program(op(), p, c);
  ASSERT_EQ(prog.steps.size(), 1u);
  EXPECT_EQ(prog.steps[0].kernel->name, "gemv_nn_r1");
  cuda::LoweredKernel lk =
      cuda::lower_kernel(prog.steps[0].kernel, passes::Target::parse("sm_90a"));
  const int64_t bn = c.at("bn"), bk = c.at("bk"), stages = c.at("stages");
  EXPECT_EQ(lk.smem_bytes, stages * (bk * bn * 2 + 1024) + 2048 * 4);
  EXPECT_TRUE(lk.tmas.empty());
  EXPECT_EQ(op().grid(p, c), (std::array<int64_t, 3>{4096 / bn, 1, 1}));
}

TEST(GemmGemv, ConfigsItCannotRunAreUserErrorsNamingWhy) {
  auto rejected = [&](const std::string& shape, const Config& c, const std::string& word) {
    try {
      check_config(op(), problem(shape), c, "sm_90a");
      ADD_FAILURE() << shape << " " << config_str(c) << " accepted";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  };
  const Config c = gemv_config(16, 256, 3);
  rejected("M=1,N=64,K=64,layout=tn", c, "takes layout=nt or nn");
  rejected("M=4,N=64,K=64,layout=tn", gemv_config(16, 256, 3, 4), "takes layout=nt or nn");
  Config too_many = gemv_config(16, 256, 3, gemv::kMaxRows + 1);
  rejected("M=1,N=64,K=64,layout=nt", too_many, "gemv");
  Config split = c;
  split["splits"] = 4;
  rejected("M=1,N=64,K=64,layout=nt", split, "splits");
  Config persistent = c;
  persistent["persistent"] = 1;
  rejected("M=1,N=64,K=64,layout=nt", persistent, "persistent");
  check_config(op(), problem("M=1,N=64,K=64,layout=nt"), c, "sm_90a");
  check_config(op(), problem("M=1,N=64,K=64,layout=nn"), c, "sm_90a");
  check_config(op(), problem("M=9,N=64,K=64,layout=nt"), gemv_config(16, 256, 3, 4), "sm_90a");
  // gemv=0 over the GEMV's config is a valid wgmma tile (bm = 64), as a partial config that
  // turns it off gets.
  Config off = gemv::gemv_config();
  off["gemv"] = 0;
  check_config(op(), problem("M=1,N=64,K=64,layout=nt"), off, "sm_90a");
}
