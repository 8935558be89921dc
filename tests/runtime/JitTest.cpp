// The compile-only JIT path (no driver needed): cache miss then hit, bypass, and key inputs.
#include <gtest/gtest.h>

#include "RuntimeTestUtil.h"
#include "runtime/Jit.h"
#include "runtime/KernelCache.h"
#include "runtime/ResourceUsage.h"
#include "tilepilot/error.h"

using namespace tp;
using namespace tp::rt;

TEST(Jit, CompileOnlyMissesThenHitsTheCache) {
  if (!KernelCache::global().enabled()) GTEST_SKIP() << "TILEPILOT_CACHE=off";
  std::string src = test::scale_kernel(test::unique_tag());
  JitKernel cold = jit_compile_only(src, "scale", "kernel scale {}", "sm_90a", {});
  EXPECT_FALSE(cold.cache_hit);
  EXPECT_GT(cold.nvrtc_seconds, 0);
  EXPECT_EQ(cold.module, nullptr);
  ASSERT_FALSE(cold.compiled.cubin.empty());

  JitKernel warm = jit_compile_only(src, "scale", "kernel scale {}", "sm_90a", {});
  EXPECT_TRUE(warm.cache_hit);
  EXPECT_EQ(warm.nvrtc_seconds, 0);
  EXPECT_EQ(warm.key, cold.key);
  EXPECT_EQ(warm.compiled.cubin, cold.compiled.cubin);
  EXPECT_EQ(warm.compiled.ptx, cold.compiled.ptx);
  // The ptxas log survives the cache, so `show --stage resources` works on a warm cache.
  EXPECT_GT(resource_usage(warm.compiled.log, "scale").registers, 0);
}

TEST(Jit, BypassAlwaysCompiles) {
  std::string src = test::scale_kernel(test::unique_tag());
  jit_compile_only(src, "scale", "ir", "sm_80", {});
  JitKernel k = jit_compile_only(src, "scale", "ir", "sm_80", {}, /*bypass_cache=*/true);
  EXPECT_FALSE(k.cache_hit);
  EXPECT_GT(k.nvrtc_seconds, 0);
}

TEST(Jit, KeyCoversIrSourceArchAndOptions) {
  std::string src = test::scale_kernel("keys");
  auto key = [&](std::string ir, std::string s, std::string arch, std::vector<std::string> o) {
    return jit_compile_only(s, "scale", ir, arch, o).key;
  };
  std::string base = key("ir", src, "sm_90a", {});
  EXPECT_EQ(base, key("ir", src, "sm_90a", {}));
  EXPECT_NE(base, key("ir2", src, "sm_90a", {}));
  EXPECT_NE(base, key("ir", src + "\n", "sm_90a", {})); // codegen changes never hit stale cubins
  EXPECT_NE(base, key("ir", src, "sm_80", {}));
  EXPECT_NE(base, key("ir", src, "sm_90a", {"-lineinfo"}));
}

TEST(Jit, CompileErrorsPropagate) {
  EXPECT_THROW(jit_compile_only("this is not CUDA", "bad", "ir", "sm_90a", {}), UserError);
}
