// The timing summary (CPU) and the harness's argument checks. The GPU side of the harness (a
// 1 ms sleep measures 1 ms, the flush stays outside the timed window) is tested with the bench
// programs in tests/vendor/BenchHarnessTest.cpp, which use this same harness.
#include <gtest/gtest.h>

#include "runtime/Timing.h"
#include "tilepilot/error.h"
#include "tilepilot/runtime.h"

using namespace tp;
using namespace tp::rt;

TEST(Timing, MedianAndInterquartileRange) {
  Timing t = summarize({5, 1, 4, 2, 3});
  EXPECT_DOUBLE_EQ(t.median_ms, 3);
  EXPECT_DOUBLE_EQ(t.iqr_ms, 2);
  EXPECT_DOUBLE_EQ(t.min_ms, 1);
  EXPECT_DOUBLE_EQ(t.max_ms, 5);
  EXPECT_EQ(t.samples_ms, (std::vector<double>{1, 2, 3, 4, 5})) << "kept, sorted";
  Timing none = summarize({});
  EXPECT_EQ(none.median_ms, 0);
  EXPECT_TRUE(none.samples_ms.empty());
  EXPECT_DOUBLE_EQ(tflops(1e12, 1), 1000);
  EXPECT_EQ(tflops(1e12, 0), 0) << "no division by zero for an unmeasured time";
}

TEST(Timing, BadRunCountsAreUserErrorsBeforeAnyGpuWork) {
  EXPECT_THROW(TimingHarness(TimingOptions{.runs = 0}), UserError);
  EXPECT_THROW(TimingHarness(TimingOptions{.warmup = -1}), UserError);
}
