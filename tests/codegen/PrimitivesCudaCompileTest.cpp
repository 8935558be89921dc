// The primitives kernel (PrimitivesKernel.h: 8- and 4-bit dtypes, bit operators, tanh / erf /
// sigmoid / pow) lowers for CUDA and compiles through NVRTC without a GPU: on sm_90a the fp8
// conversions are the cvt.satfinite instructions, on sm_80 (which has none) the device
// library's integer fallback; the math calls are the accurate functions, not approximations.
#include <gtest/gtest.h>

#include "PrimitivesKernel.h"
#include "codegen/cuda/LoweredKernel.h"
#include "compile/Lower.h"
#include "runtime/Jit.h"

using namespace tp;

TEST(PrimitivesCuda, LowerAndCompileForSm90aAndSm80) {
  Kernel k = test::primitives_kernel();
  for (std::string arch : {"sm_90a", "sm_80"}) {
    cuda::LoweredKernel lk = cuda::lower_kernel(k, passes::Target::parse(arch));
    for (const char* s :
         {"tp::cg::int4_at(", "tp::cg::to_i8(", "tp::cg::to_u8(", "tp::cg::to_int4(",
          "tp::cg::as<tp::fp8e4m3>(", "tp::cg::as<tp::fp8e5m2>(", "tp::cg::f(", "tanhf(", "erff(",
          "powf(", "expf(", "const tp::fp8e4m3* __restrict__ E4",
          "const unsigned char* __restrict__ Q", "& 31)"})
      EXPECT_NE(lk.source.find(s), std::string::npos) << arch << ": no " << s << "\n" << lk.source;
    rt::JitKernel j = rt::jit_compile_only(lk.source, lk.entry, lk.canonical_ir, arch, {});
    EXPECT_FALSE(j.compiled.cubin.empty()) << arch << "\n" << j.compiled.log;
    const std::string& ptx = j.compiled.ptx;
    bool hw_fp8 = arch == "sm_90a";
    EXPECT_EQ(ptx.find("cvt.rn.satfinite.e4m3x2.f32") != std::string::npos, hw_fp8) << arch;
    EXPECT_EQ(ptx.find("cvt.rn.satfinite.e5m2x2.f32") != std::string::npos, hw_fp8) << arch;
    EXPECT_EQ(ptx.find("cvt.rn.f16x2.e4m3x2") != std::string::npos, hw_fp8) << arch;
    // Accurate math: tanhf / erff / powf are not the approximate instructions alone.
    EXPECT_EQ(ptx.find("tanh.approx"), std::string::npos) << arch;
  }
}

// Shared tiles of the 1-byte types in a pipelined loop (global -> shared -> fragment) lower and
// compile for sm_90a, where the shared tile is loaded by TMA like a 16-bit one, and sm_80.
TEST(PrimitivesCuda, PipelinedOneByteSharedTilesCompileWithTmaOnSm90a) {
  for (DType t : {fp8_e4m3, i8, u8}) {
    Kernel k = test::one_byte_pipeline_kernel(t);
    for (std::string arch : {"sm_90a", "sm_80"}) {
      cuda::LoweredKernel lk = cuda::lower_kernel(k, passes::Target::parse(arch));
      rt::JitKernel j = rt::jit_compile_only(lk.source, lk.entry, lk.canonical_ir, arch, {});
      EXPECT_FALSE(j.compiled.cubin.empty()) << dtype_name(t) << " " << arch << "\n"
                                             << j.compiled.log;
      bool tma = arch == "sm_90a";
      EXPECT_EQ(lk.tmas.size(), tma ? 1u : 0u) << dtype_name(t) << " " << arch;
      EXPECT_EQ(j.compiled.ptx.find("cp.async.bulk.tensor") != std::string::npos, tma)
          << dtype_name(t) << " " << arch;
    }
  }
}
