// The CUDA tuning hooks. Without a GPU (CI): compile runs NVRTC and returns ptxas's report,
// invalid configs are user errors (verify_failed) and NVRTC failures are not, measure and
// check_correct are absent with the reason, and registration keeps an existing factory. On an
// sm_90a GPU (label gpu): a small search measures, checks and picks a correct winner.
#include <gtest/gtest.h>

#include "autotune/ConfigSpace.h"
#include "autotune/CudaHooks.h"
#include "autotune/Tuner.h"
#include "ops/CudaCheck.h"
#include "runtime/Nvrtc.h"
#include "tilepilot/error.h"
#include "tilepilot/runtime.h"

using namespace tp;
using namespace tp::autotune;

namespace {

const ops::Operator& gemm() {
  return ops::find_operator("gemm");
}

ops::Problem problem(int64_t M, int64_t N, int64_t K) {
  return gemm().parse(
      {{"M", std::to_string(M)}, {"N", std::to_string(N)}, {"K", std::to_string(K)}}, bf16);
}

} // namespace

TEST(CudaHooks, CompileReportsRegistersWithoutAGpu) {
  std::string why;
  if (!rt::nvrtc_available(&why)) GTEST_SKIP() << "no NVRTC here: " << why;
  ops::Problem p = problem(256, 256, 256);
  TuneHooks h = cuda_tune_hooks(gemm(), p, "sm_90a");
  ASSERT_TRUE(h.compile);
  CompiledCandidate cc = h.compile(gemm().default_config(p, "sm_90a"));
  EXPECT_GT(cc.usage.registers, 0) << cc.usage.raw;
  EXPECT_EQ(cc.usage.spill_store_bytes, 0);
  EXPECT_TRUE(cc.artifact);
}

TEST(CudaHooks, InvalidConfigIsAUserError) {
  ops::Problem p = problem(256, 256, 256);
  TuneHooks h = cuda_tune_hooks(gemm(), p, "sm_90a");
  ops::Config c = gemm().default_config(p, "sm_90a");
  c["bm"] = 40; // not a multiple of 16: the operator rejects it
  EXPECT_THROW(h.compile(c), UserError);
  EXPECT_THROW(cuda_tune_hooks(gemm(), p, "sm_70"), UserError);
}

TEST(CudaHooks, WithoutAGpuOnlyCompileIsSetAndMeasureSaysWhy) {
  if (rt::device_count() > 0) GTEST_SKIP() << "a GPU is present";
  TuneHooks h = cuda_tune_hooks(gemm(), problem(256, 256, 256), "sm_90a");
  EXPECT_TRUE(h.compile);
  EXPECT_FALSE(h.measure);
  EXPECT_FALSE(h.check_correct);
  EXPECT_EQ(h.why_no_measure.rfind("no GPU: ", 0), 0u) << h.why_no_measure;
}

TEST(CudaHooks, CompileOnlySearchCompilesEveryKeptCandidate) {
  std::string why;
  if (!rt::nvrtc_available(&why)) GTEST_SKIP() << "no NVRTC here: " << why;
  ops::Problem p = problem(256, 256, 256);
  std::vector<ops::Knob> knobs = restrict_space(
      knob_space(gemm(), "sm_90a"), "bm=64|128,bn=64,stages=2,threads=128|256,swizzle=0");
  ConfigSpace space = enumerate(gemm(), p, TargetLimits::for_arch("sm_90a"), knobs);
  ASSERT_FALSE(space.kept.empty());
  TuneHooks h = cuda_tune_hooks(gemm(), p, "sm_90a");
  h.measure = nullptr; // a compile check, as `tilepilot tune` does without a GPU
  TuneOptions o;
  o.progress = TuneOptions::Progress::off;
  o.compile_threads = 2;
  TuneResult r = tune(space, h, o);
  EXPECT_FALSE(r.found);
  for (const CandidateLog& c : r.log) {
    if (c.status == CandidateStatus::pruned) continue;
    EXPECT_EQ(c.status, CandidateStatus::compiled) << ops::config_str(c.config) << ": " << c.reason;
    EXPECT_GT(c.registers, 0) << ops::config_str(c.config);
  }
}

TEST(CudaHooks, RegistrationKeepsAFactoryAlreadyThere) {
  bool called = false;
  set_default_hooks([&called](const ops::Operator&, const ops::Problem&, const std::string&) {
    called = true;
    return TuneHooks{};
  });
  register_cuda_tune_hooks();
  default_hooks(gemm(), problem(64, 64, 64), "sm_90a");
  EXPECT_TRUE(called) << "a test's (or an application's) factory must not be replaced";
  set_default_hooks(nullptr);
  register_cuda_tune_hooks();
  EXPECT_TRUE(has_default_hooks());
  std::optional<TuneHooks> h = default_hooks(gemm(), problem(64, 64, 64), "sm_90a");
  ASSERT_TRUE(h);
  EXPECT_TRUE(h->compile);
  set_default_hooks(nullptr);
}

TEST(GpuCudaHooks, SmallSearchMeasuresChecksAndPicksACorrectWinner) {
  if (tp::rt::device_count() == 0) GTEST_SKIP() << "no GPU";
  const std::string arch = ops::device_arch();
  ops::Problem p = problem(1024, 1024, 1024);
  std::vector<ops::Knob> knobs = restrict_space(knob_space(gemm(), arch), "stages=2|3");
  std::string dflt = ops::config_str(gemm().default_config(p, arch));
  ConfigSpace space = enumerate(gemm(), p, TargetLimits::for_arch(arch), knobs);
  if (space.kept.size() > 6) space.kept.resize(6); // the default first, then the heuristic's best
  TuneHooks h = cuda_tune_hooks(gemm(), p, arch);
  ASSERT_TRUE(h.measure) << h.why_no_measure;
  ASSERT_TRUE(h.check_correct);
  TuneOptions o;
  o.progress = TuneOptions::Progress::off;
  TuneResult r = tune(space, h, o);
  ASSERT_TRUE(r.found) << to_json(r).dump(2);
  EXPECT_EQ(r.best_measurement.ms.size(), size_t(o.full_iters));
  EXPECT_GT(r.best_measurement.median_ms(), 0);
  EXPECT_LT(r.best_measurement.median_ms(), 20) << "2 GFLOP on an H200";
  const CandidateLog* best = r.best_log();
  ASSERT_NE(best, nullptr);
  EXPECT_GE(best->check_s, 0) << "the winner was checked";
  EXPECT_GT(best->registers, 0);
  // The winner is correct by the CUDA check on fresh inputs, too.
  ops::CheckOptions co;
  co.config = r.best;
  co.seed = 99;
  EXPECT_TRUE(ops::check_cuda(gemm(), p, co).passed);
}
