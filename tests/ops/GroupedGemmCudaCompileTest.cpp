// grouped_gemm through the CUDA backend without a GPU: the default sm_90a and sm_80 kernels at
// Mixtral-8x7B (8 experts, hidden 4096, ffn 14336) and DeepSeek-style (64 experts, hidden 2048,
// expert ffn 1408) prefill and decode shapes, both layouts and 256 experts, lower and compile
// through NVRTC without spilling; on sm_90a the in-kernel tile scan keeps the kernel
// warp-specialized (its lets read only offs, which the TMA producer may evaluate).
#include <gtest/gtest.h>

#include "codegen/cuda/LoweredKernel.h"
#include "compile/Lower.h"
#include "ops/Operator.h"
#include "runtime/Jit.h"
#include "runtime/ResourceUsage.h"

using namespace tp;
using namespace tp::ops;

namespace {

struct Shipped {
  std::string shape, arch;
};

void PrintTo(const Shipped& s, std::ostream* os) {
  *os << s.arch << " " << s.shape;
}

std::vector<Shipped> shipped() {
  std::vector<Shipped> out;
  for (std::string arch : {"sm_90a", "sm_80"})
    for (std::string s :
         {"E=8,R=8192,N=28672,K=4096", "E=8,R=8192,N=4096,K=14336", "E=8,R=64,N=28672,K=4096",
          "E=64,R=24576,N=2816,K=2048", "E=64,R=384,N=2048,K=1408",
          "E=8,R=1000,N=1000,K=1000,layout=nn", "E=256,R=2048,N=512,K=7168"})
      out.push_back({s, arch});
  return out;
}

std::string name_of(const testing::TestParamInfo<Shipped>& i) {
  std::string n = i.param.arch + "_" + i.param.shape;
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

class GroupedGemmShipped : public testing::TestWithParam<Shipped> {};

TEST_P(GroupedGemmShipped, CompilesThroughNvrtcWithoutSpilling) {
  const Shipped& s = GetParam();
  const Operator& op = find_operator("grouped_gemm");
  Problem p = op.parse(parse_kv(s.shape, "--shape"), DType::bf16);
  const Config c = op.default_config(p, s.arch);
  Kernel k = op.build(p, c);
  const passes::Target t = passes::Target::parse(s.arch);
  cuda::LoweredKernel lk = cuda::lower_kernel(k, t);
  // A warp-specialized kernel adds its TMA producer warpgroup to the consumers' threads.
  if (s.arch == "sm_90a") EXPECT_EQ(lk.block_threads, c.at("threads") + 128);
  // Bypass the kernel cache: the test reads ptxas' report of this compile.
  rt::JitKernel j = rt::jit_compile_only(lk.source, lk.entry, lk.canonical_ir, s.arch, {}, true);
  EXPECT_FALSE(j.compiled.cubin.empty());
  rt::ResourceUsage u = rt::resource_usage(j.compiled.log, lk.entry);
  EXPECT_GT(u.registers, 0) << j.compiled.log;
  EXPECT_EQ(u.spill_store_bytes, 0) << u.raw;
  EXPECT_EQ(u.spill_load_bytes, 0) << u.raw;
}

INSTANTIATE_TEST_SUITE_P(Defaults, GroupedGemmShipped, testing::ValuesIn(shipped()), name_of);

} // namespace
