// Without a GPU (this is how CI runs), every measurement says so with a user error before doing
// any work, and the reference choice rejects what no vendor library runs. Skipped where a CUDA
// driver is present: there these paths are exercised by the Gpu* tests.
#include <gtest/gtest.h>

#include "ops/CudaCheck.h"
#include "perf/FallbackCheck.h"
#include "perf/PeakMemory.h"
#include "perf/SideBySide.h"
#include "perf/VendorReference.h"
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
  m = message_of([&] { perf::make_reference(p); });
  EXPECT_NE(m.find("cuBLASLt) cannot run here"), std::string::npos) << m;
}

TEST(PerfWithoutGpu, NoVendorReferenceForF32) {
  std::string m = message_of([&] { perf::make_reference(gemm_problem(DType::f32)); });
  EXPECT_NE(m.find("used for bf16 and f16 only; use --dtype bf16"), std::string::npos) << m;
  m = message_of([&] { perf::make_reference(gemm_problem(), /*allow_vendor=*/false); });
  EXPECT_NE(m.find("no reference other than cuBLASLt"), std::string::npos) << m;
}
