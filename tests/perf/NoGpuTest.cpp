// Without a GPU (this is how CI runs), every measurement says so with a user error before doing
// any work, and the reference choice rejects what no vendor library runs. Skipped where a CUDA
// driver is present: there these paths are exercised by the Gpu* tests.
#include <gtest/gtest.h>

#include "ops/CudaCheck.h"
#include "perf/FallbackCheck.h"
#include "perf/PeakMemory.h"
#include "perf/SideBySide.h"
#include "tilepilot/runtime.h"

using namespace tp;

namespace {

ops::Problem gemm_problem(DType t = DType::bf16) {
  return ops::find_operator("gemm").parse({{"M", "64"}, {"N", "64"}, {"K", "64"}}, t);
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no UserError thrown)";
}

} // namespace

TEST(PerfWithoutGpu, MeasurementsSayTheyNeedAGpu) {
  if (rt::driver_available()) GTEST_SKIP() << "a CUDA driver is present here";
  const ops::Operator& gemm = ops::find_operator("gemm");
  ops::Problem p = gemm_problem();
  ops::Config c = gemm.default_config(p, "sm_90a");
  std::string m = message_of([&] { perf::time_side_by_side(gemm, p, c); });
  EXPECT_NE(m.find("needs a GPU"), std::string::npos) << m;
  m = message_of([&] { perf::measure_peak_memory(gemm, p, c); });
  EXPECT_NE(m.find("CUDA driver"), std::string::npos) << m;
  m = message_of([&] { perf::check_fallback(gemm, p); });
  EXPECT_NE(m.find("CUDA driver"), std::string::npos) << m;
  // Without cuBLASLt's GPU the framework operator is the fp32 GPU reference, which needs one too.
  m = message_of([&] { gemm.framework(p, {})->run({}, nullptr); });
  EXPECT_FALSE(m.empty());
}

TEST(PerfWithoutGpu, NoVendorReferenceForF32) {
  const ops::Operator& gemm = ops::find_operator("gemm");
  std::string m = message_of([&] { gemm.framework(gemm_problem(DType::f32), {}); });
  EXPECT_NE(m.find("no framework operator runs f32"), std::string::npos) << m;
  EXPECT_NE(m.find("use --dtype bf16"), std::string::npos) << m;
}
