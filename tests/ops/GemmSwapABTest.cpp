// gemm's swapped decode form (swap_ab=1, ops/gemm/GemmSwapAB.h) on the CPU: it agrees with the
// fp64 reference on every element at odd shapes (M, N and K not multiples of the tile, M = 1,
// K shorter than a step) in the three layouts and three dtypes; on sm_90a it is one
// warp-specialized TMA kernel whose gemm runs on wgmma with B's tile as the first operand and
// whose stages hold B's bytes and A's few rows only; configs it cannot run are user errors
// naming why; it compiles through NVRTC for sm_90a (with and without TMA) and sm_80 without
// spilling.
#include <gtest/gtest.h>

#include "codegen/cuda/LoweredKernel.h"
#include "compile/Lower.h"
#include "ops/Check.h"
#include "ops/gemm/GemmOp.h"
#include "runtime/Jit.h"
#include "runtime/ResourceUsage.h"
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

Config swapped(int64_t bm, int64_t bn, int64_t bk, int64_t stages, int64_t threads = 128) {
  return {{"swap_ab", 1},     {"bm", bm},           {"bn", bn},   {"bk", bk},
          {"stages", stages}, {"threads", threads}, {"splits", 1}};
}

} // namespace

TEST(GemmSwapAB, AgreesWithFp64ReferenceOnEveryElementAtOddShapes) {
  struct Case {
    std::string shape;
    DType dtype;
    Config config;
  };
  const std::vector<Case> cases = {
      {"M=4,N=130,K=333", DType::bf16, swapped(16, 64, 64, 3)},        // tails in N and K
      {"M=1,N=77,K=40", DType::bf16, swapped(16, 64, 64, 2)},          // K shorter than a step
      {"M=19,N=64,K=200", DType::f16, swapped(16, 64, 64, 4)},         // two block rows, ragged
      {"M=7,N=200,K=256", DType::bf16, swapped(32, 128, 128, 2, 256)}, // two warpgroups
      {"M=3,N=70,K=96", DType::f32, swapped(16, 64, 32, 2)},           // f32
  };
  for (const std::string layout : {"nn", "nt", "tn"})
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

TEST(GemmSwapAB, Sm90PlanIsOneTmaKernelWithBAsTheFirstOperand) {
  for (const std::string layout : {"nn", "nt"}) {
    SCOPED_TRACE(layout);
    Problem p = problem("M=4,N=4096,K=4096,layout=" + layout);
    const Config c = swapped(16, 64, 128, 8);
    KernelProgram prog = checked_program(op(), p, c);
    ASSERT_EQ(prog.steps.size(), 1u);
    EXPECT_EQ(prog.steps[0].kernel->name, "gemm_" + layout + "_swapped");
    cuda::LoweredKernel lk =
        cuda::lower_kernel(prog.steps[0].kernel, passes::Target::parse("sm_90a"));
    // A stage is B's 128 x 64 tile and A's 16 rows of 128: 20 KB, of which 2 KB for M.
    EXPECT_EQ(lk.tmas.size(), 2u);
    EXPECT_GE(lk.smem_bytes, 8 * (128 * 64 * 2 + 16 * 128 * 2));
    EXPECT_LT(lk.smem_bytes, 8 * (128 * 64 * 2 + 16 * 128 * 2) + 1024);
    EXPECT_EQ(lk.block_threads, 256); // one consumer warpgroup and the producer's
    EXPECT_NE(lk.lowered_text.find("wgmma_ss"), std::string::npos) << lk.lowered_text;
    // The accumulator is C^T's tile: bn = 64 rows (N) by bm = 16 columns (M).
    EXPECT_NE(lk.lowered_text.find("wgmma_acc[64x16, 1 warpgroups]"), std::string::npos)
        << lk.lowered_text;
    // One block per 64 columns of C, a block row per 16 rows.
    EXPECT_EQ(op().grid(p, c), (std::array<int64_t, 3>{64, 1, 1}));
    // The tuner's estimate is the compiler's plan (bm = 16 is wgmma's N here, not its M).
    Estimate e = op().estimate(p, c, "sm_90a");
    EXPECT_TRUE(e.divisibility.empty()) << e.divisibility;
    EXPECT_EQ(e.smem_bytes, lk.smem_bytes);
  }
}

TEST(GemmSwapAB, ConfigsItCannotRunAreUserErrorsNamingWhy) {
  auto rejected = [&](const Config& c, const std::string& word) {
    try {
      check_config(op(), problem("M=4,N=256,K=256"), c, "sm_90a");
      ADD_FAILURE() << config_str(c) << " accepted";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  };
  Config split = swapped(16, 64, 64, 4);
  split["splits"] = 4;
  rejected(split, "takes no splits=4");
  Config persistent = swapped(16, 64, 64, 4);
  persistent["persistent"] = 1;
  rejected(persistent, "takes no persistent=1");
  rejected(swapped(16, 128, 64, 4, 128), "bn must be 64 * threads / 128");
  rejected(swapped(512, 64, 64, 2), "at most 256");
  check_config(op(), problem("M=4,N=256,K=256"), swapped(16, 64, 64, 4), "sm_90a");
  check_config(op(), problem("M=4,N=256,K=256"), swapped(16, 128, 64, 4, 256), "sm_90a");
  // The knobs at their neutral values, as a tuned config carries every knob.
  Config neutral = swapped(16, 64, 64, 4);
  neutral.insert({{"cluster", 1}, {"persistent", 0}, {"gemv", 0}, {"swizzle", 0}, {"pad_k", 0}});
  check_config(op(), problem("M=4,N=256,K=256"), neutral, "sm_90a");
}

TEST(GemmSwapAB, CompilesThroughNvrtcWithoutSpilling) {
  for (const std::string layout : {"nn", "nt", "tn"})
    for (const Config& c : {swapped(16, 64, 128, 8), swapped(32, 128, 64, 4, 256)})
      for (const char* arch : {"sm_90a", "sm_90a-notma", "sm_80"}) {
        // The two-warpgroup config on sm_90a only: the other targets' code is the same per
        // warpgroup (NVRTC takes seconds a kernel on the test machines).
        if (c.at("threads") == 256 && std::string(arch) != "sm_90a") continue;
        Kernel k = checked_program(op(), problem("M=4,N=4096,K=4096,layout=" + layout), c)
                       .steps.back()
                       .kernel;
        const passes::Target t = passes::Target::parse(arch);
        SCOPED_TRACE(layout + " " + config_str(c) + " " + arch);
        cuda::LoweredKernel lk = cuda::lower_kernel(k, t);
        // Bypass the kernel cache: the test reads ptxas' report of this compile.
        rt::JitKernel j =
            rt::jit_compile_only(lk.source, lk.entry, lk.canonical_ir, t.arch, {}, true);
        EXPECT_FALSE(j.compiled.cubin.empty());
        rt::ResourceUsage u = rt::resource_usage(j.compiled.log, lk.entry);
        EXPECT_GT(u.registers, 0) << j.compiled.log;
        EXPECT_EQ(u.spill_store_bytes, 0) << u.raw;
        EXPECT_EQ(u.spill_load_bytes, 0) << u.raw;
      }
}
