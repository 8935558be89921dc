// Without a CUDA driver (CI, this development machine) the runtime says so: driver_available is
// false with a reason, and every call that needs a GPU throws a UserError naming the problem.
// On a GPU machine the no-driver checks are skipped; the Gpu* suites cover that side.
#include <gtest/gtest.h>

#include "RuntimeTestUtil.h"
#include "runtime/DeviceBuffer.h"
#include "runtime/Driver.h"
#include "runtime/Jit.h"
#include "runtime/Launch.h"
#include "tilepilot/error.h"

using namespace tp;
using namespace tp::rt;

namespace {

/// Runs `f`, expecting the no-driver UserError.
template <typename F>
void expect_no_driver_error(F f, const char* what) {
  try {
    f();
    ADD_FAILURE() << what << ": expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA driver was found"), std::string::npos)
        << what << ": " << e.what();
  }
}

} // namespace

TEST(Driver, MissingLibraryIsReportedWithItsName) {
  std::string why;
  EXPECT_EQ(Driver::load("libcuda-does-not-exist.so.1", &why), nullptr);
  EXPECT_NE(why.find("no CUDA driver was found"), std::string::npos) << why;
  EXPECT_NE(why.find("libcuda-does-not-exist.so.1"), std::string::npos) << why;
}

TEST(Driver, LibraryWithoutDriverSymbolsIsRejected) {
  std::string why;
  EXPECT_EQ(Driver::load("libm.so.6", &why), nullptr);
  EXPECT_NE(why.find("lacks cuInit"), std::string::npos) << why;
  EXPECT_NE(why.find("cuMemAlloc_v2"), std::string::npos) << why; // versioned names are used
}

TEST(Driver, NoDriverMeansNotAvailableWithAReason) {
  std::string why;
  if (driver_available(&why)) GTEST_SKIP() << "a CUDA driver is present";
  EXPECT_NE(why.find("no CUDA driver was found"), std::string::npos) << why;
  EXPECT_NE(why.find("libcuda.so.1"), std::string::npos) << why;
  std::string why_count, why_info;
  EXPECT_EQ(device_count(&why_count), 0);
  EXPECT_EQ(why_count, why);
  EXPECT_FALSE(device_info(0, &why_info));
  EXPECT_EQ(why_info, why);
}

TEST(Driver, CallsNeedingAGpuThrowWithoutADriver) {
  if (driver_available()) GTEST_SKIP() << "a CUDA driver is present";
  expect_no_driver_error([] { driver(); }, "driver()");
  try {
    driver();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("CPU backend"), std::string::npos); // what still works
  }
  expect_no_driver_error([] { ensure_context(); }, "ensure_context");
  expect_no_driver_error([] { DeviceBuffer b(1024); }, "DeviceBuffer");
  expect_no_driver_error([] { Stream s; }, "Stream");
  expect_no_driver_error([] { EventTimer t; }, "EventTimer");
  expect_no_driver_error([] { jit_load(test::scale_kernel(), "scale", "ir", "sm_90a", {}); },
                         "jit_load");
}

TEST(Driver, EmptyBufferNeedsNoDriver) {
  DeviceBuffer b; // default-constructed and zero-byte buffers touch nothing
  EXPECT_EQ(b.bytes(), 0u);
  DeviceBuffer z(0);
  EXPECT_EQ(z.ptr(), 0u);
}

TEST(Driver, FailedCallNamesTheFunction) {
  try {
    check_cu(CUDA_ERROR_OUT_OF_MEMORY, "driver().cuMemAlloc(&p, n)");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("cuMemAlloc failed: "), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(check_cu(CUDA_SUCCESS, "cuInit(0)"));
}

TEST(Driver, ArchStringsUseTheArchSpecificVariantFromHopperOn) {
  EXPECT_EQ(arch_for(8, 0), "sm_80");
  EXPECT_EQ(arch_for(8, 9), "sm_89");
  EXPECT_EQ(arch_for(9, 0), "sm_90a");
  EXPECT_EQ(arch_for(10, 0), "sm_100a");
}

TEST(Driver, FormatsByteCounts) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(uint64_t(141) << 30), "141.00 GiB");
}
