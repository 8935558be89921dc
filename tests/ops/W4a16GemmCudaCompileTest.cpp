// w4a16_gemm through the CUDA backend without a GPU: the default sm_90a and sm_80 kernels for
// decode and prefill at Llama-3-8B shapes, a group that a K step covers several of, and odd
// shapes, lower and compile through NVRTC without spilling (two decode blocks per SM too, each
// within half the register file); the decode configs get the
// tensor-core gemm; the dequantize kernel of the framework chain compiles for both dtypes.
#include <gtest/gtest.h>

#include <tuple>

#include "codegen/cuda/LoweredKernel.h"
#include "compile/Lower.h"
#include "ops/w4a16_gemm/W4a16Gemm.h"
#include "ops/w4a16_gemm/W4a16GemmFramework.h"
#include "runtime/Jit.h"
#include "runtime/ResourceUsage.h"

using namespace tp;
using namespace tp::ops;

namespace {

struct Shipped {
  std::string arch;
  int64_t M, N, K, group;
  Config config; // empty: the default for the arch
};

Problem problem_of(const Shipped& s) {
  return w4a16::parse({{"M", std::to_string(s.M)},
                       {"N", std::to_string(s.N)},
                       {"K", std::to_string(s.K)},
                       {"group", std::to_string(s.group)}},
                      DType::bf16);
}

std::vector<Shipped> shipped() {
  std::vector<Shipped> out;
  for (std::string arch : {"sm_90a", "sm_80"}) {
    for (int64_t M : {1, 16, 2048})
      out.push_back({arch, M, 4096, 4096, 128, {}});
    out.push_back({arch, 1, 28672, 4096, 128, {}});
    out.push_back({arch, 2048, 4096, 14336, 128, {}});
    out.push_back({arch, 3, 77, 256, 128, {}});
    // bk = 64 over groups of 32: the scale rows go through shared memory.
    out.push_back({arch, 77, 45, 160, 32, {}});
    out.push_back({arch,
                   77,
                   45,
                   160,
                   32,
                   {{"bm", 64}, {"bn", 64}, {"bk", 64}, {"stages", 2}, {"threads", 128}}});
  }
  // Two, three and four decode blocks per SM: each keeps within its share of the register file
  // (consumers 232, 136, 104 after setmaxnreg) and of the shared memory.
  for (auto [bn, stages, blocks] :
       {std::tuple<int64_t, int64_t, int64_t>{128, 4, 2}, {64, 4, 2}, {64, 4, 3}, {64, 3, 4}})
    out.push_back({"sm_90a",
                   16,
                   28672,
                   4096,
                   128,
                   {{"bm", 64},
                    {"bn", bn},
                    {"bk", 64},
                    {"stages", stages},
                    {"threads", 128},
                    {"blocks_per_sm", blocks}}});
  return out;
}

// The number in `tp::warpgroup::setmaxnreg_dec<24>` after its prefix; 0 when absent.
int count_after(const std::string& source, const std::string& prefix) {
  const size_t at = source.find(prefix);
  return at == std::string::npos ? 0 : std::stoi(source.substr(at + prefix.size()));
}

std::string name_of(const testing::TestParamInfo<Shipped>& i) {
  const Shipped& s = i.param;
  return s.arch + "_M" + std::to_string(s.M) + "_N" + std::to_string(s.N) + "_K" +
         std::to_string(s.K) + "_g" + std::to_string(s.group) + "_" + std::to_string(i.index);
}

class W4a16GemmShipped : public testing::TestWithParam<Shipped> {};

TEST_P(W4a16GemmShipped, CompilesThroughNvrtcWithoutSpilling) {
  const Shipped& s = GetParam();
  Problem p = problem_of(s);
  Config c = s.config.empty() ? w4a16::default_config(p, s.arch) : s.config;
  cuda::LoweredKernel lk = cuda::lower_kernel(w4a16::build(p, c), passes::Target::parse(s.arch));
  // Bypass the kernel cache: the test reads ptxas' report of this compile.
  rt::JitKernel j = rt::jit_compile_only(lk.source, lk.entry, lk.canonical_ir, s.arch, {}, true);
  EXPECT_FALSE(j.compiled.cubin.empty());
  rt::ResourceUsage u = rt::resource_usage(j.compiled.log, lk.entry);
  EXPECT_GT(u.registers, 0) << j.compiled.log;
  EXPECT_EQ(u.spill_store_bytes, 0) << config_str(c) << " " << u.raw;
  EXPECT_EQ(u.spill_load_bytes, 0) << config_str(c) << " " << u.raw;
  // The unpacking is shifts and masks, not the division trick of lesson 11: as 4-bit fields
  // gathered a byte at a time into packed products, or as shifts where it is not packed.
  EXPECT_TRUE(lk.source.find("tp::cg::small_fields2<") != std::string::npos ||
              lk.source.find(">>") != std::string::npos)
      << config_str(c);
  // The gemm runs on tensor cores, decode and prefill alike (a SIMT fallback would still pass).
  const std::string mma = s.arch == "sm_90a" ? "tp::cg::wgmma" : "tp::cg::mma";
  EXPECT_NE(lk.source.find(mma), std::string::npos) << config_str(c);
  const int64_t blocks = c.count("blocks_per_sm") ? c.at("blocks_per_sm") : 1;
  EXPECT_NE(lk.source.find("__launch_bounds__(" + std::to_string(lk.block_threads) + ", " +
                           std::to_string(blocks) + ")"),
            std::string::npos)
      << config_str(c);
  // The launch's registers fit `blocks` blocks in the SM's 64K.
  EXPECT_LE(u.registers * lk.block_threads * blocks, 65536) << config_str(c) << " " << u.raw;
  // setmaxnreg moves registers within the block's launch pool, and an increase the pool cannot
  // pay waits forever: the producer's and consumers' counts must fit what ptxas launched it with
  // (blocks_per_sm = 3 hung on the H100 on 2026-12-06 before this held).
  const int producer = count_after(lk.source, "setmaxnreg_dec<");
  const int consumer = count_after(lk.source, "setmaxnreg_inc<");
  if (producer > 0 || consumer > 0) {
    EXPECT_LE(128 * producer + (lk.block_threads - 128) * consumer, u.registers * lk.block_threads)
        << config_str(c) << " " << u.raw;
  }
}

INSTANTIATE_TEST_SUITE_P(Defaults, W4a16GemmShipped, testing::ValuesIn(shipped()), name_of);

TEST(W4a16GemmFramework, DequantizeCompilesForEveryDtype) {
  for (std::string arch : {"sm_90a", "sm_80"}) {
    std::vector<std::string> d = w4a16::compile_framework(arch);
    EXPECT_EQ(d, (std::vector<std::string>{"dequant_int4 bf16", "dequant_int4 f16"}));
  }
}

} // namespace
