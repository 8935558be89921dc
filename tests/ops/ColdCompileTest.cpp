// A cold compile of the gemm default for sm_90a is a real one: NVRTC runs the front end and
// ptxas every time the kernel cache is bypassed (its own on-disk cache stays off), so the log
// carries ptxas' resource report for the entry, and a second cold compile produces the same
// cubin. The cold-compile time split itself is measured by bench/bench_cold_compile.
#include <gtest/gtest.h>

#include "codegen/cuda/LoweredKernel.h"
#include "compile/Lower.h"
#include "ops/Operator.h"
#include "runtime/Jit.h"
#include "runtime/ResourceUsage.h"

using namespace tp;

namespace {

cuda::LoweredKernel default_kernel(const std::string& name, const std::string& arch) {
  const ops::Operator& op = ops::find_operator(name);
  ops::Problem p = op.parse(op.example_shape(), DType::bf16);
  return cuda::lower_kernel(op.build(p, ops::complete_config(op, p, arch, {})),
                            passes::Target::parse(arch));
}

} // namespace

TEST(ColdCompile, GemmDefaultRunsPtxasEveryTime) {
  cuda::LoweredKernel lk = default_kernel("gemm", "sm_90a");
  std::vector<char> first_cubin;
  for (int run = 0; run < 2; ++run) {
    rt::JitKernel j = rt::jit_compile_only(lk.source, lk.entry, lk.canonical_ir, "sm_90a", {},
                                           /*bypass_cache=*/true);
    EXPECT_FALSE(j.cache_hit);
    EXPECT_GT(j.nvrtc_seconds, 0.0);
    // ptxas names the entry it compiled and reports its registers only when it ran; a hit in
    // NVRTC's own cache returns the cubin with no such lines.
    EXPECT_NE(j.compiled.log.find("Compiling entry function '" + lk.entry + "' for 'sm_90a'"),
              std::string::npos)
        << "run " << run << " log:\n"
        << j.compiled.log;
    rt::ResourceUsage u = rt::resource_usage(j.compiled.log, lk.entry);
    EXPECT_GT(u.registers, 0) << "run " << run << "\n" << j.compiled.log;
    ASSERT_FALSE(j.compiled.cubin.empty());
    if (run == 0)
      first_cubin = j.compiled.cubin;
    else
      EXPECT_EQ(j.compiled.cubin, first_cubin) << "two cold compiles of one source differ";
  }
}
