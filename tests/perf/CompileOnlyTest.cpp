// Compile-only needs NVRTC and nothing else: it runs here without a GPU, reports ptxas's
// resource usage, and two builds of one config compile to the same cache key (which is what
// makes the warm compile of a later use a cache hit).
#include <gtest/gtest.h>

#include "ops/Operator.h"
#include "perf/CompileOnly.h"
#include "runtime/Nvrtc.h"

using namespace tp;

namespace {

ops::Problem problem(const std::string& op, std::map<std::string, std::string> kv) {
  return ops::find_operator(op).parse(kv, DType::bf16);
}

Kernel build(const ops::Problem& p, const std::string& arch) {
  const ops::Operator& op = ops::find_operator(p.op);
  return op.build(p, op.default_config(p, arch));
}

} // namespace

TEST(CompileOnly, GemmForSm90aReportsResourcesWithoutAGpu) {
  std::string why;
  if (!rt::nvrtc_available(&why)) GTEST_SKIP() << "no NVRTC here: " << why;
  ops::Problem p = problem("gemm", {{"M", "512"}, {"N", "512"}, {"K", "512"}});
  perf::CompileOnly c = perf::compile_only(build(p, "sm_90a"), "sm_90a");
  EXPECT_FALSE(c.cubin.empty());
  EXPECT_NE(c.cuda_source.find(c.entry), std::string::npos);
  EXPECT_GT(c.nvrtc_ms, 0) << "the cache is bypassed, so NVRTC ran and took time";
  EXPECT_GT(c.resources["registers"].get<int>(), 0) << c.resources << "\n" << c.nvrtc_log;
  EXPECT_GT(c.resources["shared_bytes"].get<int64_t>(), 0) << c.resources;
  EXPECT_EQ(c.resources["spill_bytes"].get<int>(), 0) << c.resources;
  EXPECT_GT(c.resources["block_threads"].get<int>(), 0);
  EXPECT_TRUE(c.resources["tma"].get<bool>()) << "the default sm_90a gemm loads with TMA";
}

TEST(CompileOnly, AttentionForSm80ReportsResources) {
  std::string why;
  if (!rt::nvrtc_available(&why)) GTEST_SKIP() << "no NVRTC here: " << why;
  ops::Problem p = problem("attention", {{"B", "1"}, {"H", "2"}, {"S", "128"}, {"D", "64"}});
  perf::CompileOnly c = perf::compile_only(build(p, "sm_80"), "sm_80");
  EXPECT_FALSE(c.cubin.empty());
  EXPECT_GT(c.resources["registers"].get<int>(), 0) << c.nvrtc_log;
  EXPECT_FALSE(c.resources["tma"].get<bool>()) << "sm_80 has no TMA";
}

TEST(CompileOnly, OneKernelCompiledTwiceHasOneCacheKey) {
  std::string why;
  if (!rt::nvrtc_available(&why)) GTEST_SKIP() << "no NVRTC here: " << why;
  ops::Problem p = problem("gemm", {{"M", "256"}, {"N", "256"}, {"K", "256"}});
  Kernel k = build(p, "sm_90a");
  perf::CompileOnly a = perf::compile_only(k, "sm_90a");
  perf::CompileOnly b = perf::compile_only(k, "sm_90a");
  EXPECT_EQ(a.cache_key, b.cache_key) << "the tuner compiles, then loads the same Kernel";
}

// Tiles are numbered per kernel (shared0, frag1, ...), so two builds of one config generate the
// same source and share a cache key: a fresh process hits the disk cache whatever it built first.
TEST(CompileOnly, TwoBuildsOfOneConfigShareTheCacheKey) {
  std::string why;
  if (!rt::nvrtc_available(&why)) GTEST_SKIP() << "no NVRTC here: " << why;
  ops::Problem p = problem("gemm", {{"M", "256"}, {"N", "256"}, {"K", "256"}});
  perf::CompileOnly a = perf::compile_only(build(p, "sm_90a"), "sm_90a");
  perf::CompileOnly b = perf::compile_only(build(p, "sm_90a"), "sm_90a");
  EXPECT_EQ(a.cache_key, b.cache_key);
}

TEST(CompileOnly, UnknownArchIsAUserError) {
  ops::Problem p = problem("gemm", {{"M", "256"}, {"N", "256"}, {"K", "256"}});
  EXPECT_THROW(perf::compile_only(build(p, "sm_90a"), "sm_70"), UserError);
}
