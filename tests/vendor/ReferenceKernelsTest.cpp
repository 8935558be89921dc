// CPU checks that the fp32 GPU reference kernels compile through NVRTC for the architectures we
// run on, so a typo in a reference is caught without a GPU.
#include <gtest/gtest.h>

#include "ops/reference/GpuReference.h"
#include "runtime/Nvrtc.h"
#include "tilepilot/error.h"

using namespace tp;

TEST(ReferenceKernels, EveryReferenceKernelCompiles) {
  std::string why;
  if (!rt::nvrtc_available(&why)) GTEST_SKIP() << "no NVRTC here: " << why;
  for (const char* arch : {"sm_90a", "sm_80"}) {
    try {
      auto done = ops::compile_gpu_references(arch);
      EXPECT_EQ(done.size(), 4u) << arch;
    } catch (const Error& e) {
      ADD_FAILURE() << arch << ": " << e.what();
    }
  }
}

TEST(ReferenceKernels, BadArgumentsAreRejectedBeforeAnyGpuWork) {
  ops::AttentionDesc d;
  d.B = 1, d.H = 1, d.Hkv = 1, d.S = 8, d.Skv = 8, d.D = 72;
  try {
    ops::gpu_reference_attention(d, {1, 1, 1, 1});
    ADD_FAILURE() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("D=72 is not supported"), std::string::npos) << e.what();
  }
  try {
    ops::gpu_reference_gemm(DType::bf16, "tt", 1, 1, 1, 1, 1, 1);
    ADD_FAILURE() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("layout 'tt'"), std::string::npos) << e.what();
  }
}
