// The device allocation counter: live bytes and a resettable high-water mark (CPU, through the
// counter's own entry points), and on the GPU (label gpu) that DeviceBuffer feeds it exactly,
// moves included.
#include <gtest/gtest.h>

#include "runtime/AllocationStats.h"
#include "runtime/DeviceBuffer.h"

using namespace tp::rt;

TEST(AllocationStats, HighWaterMarkFollowsAllocationsAndResets) {
  reset_device_allocation_peak();
  AllocationStats s0 = device_allocation_stats();
  note_device_alloc(1000);
  note_device_alloc(500);
  note_device_free(1000);
  AllocationStats s1 = device_allocation_stats();
  EXPECT_EQ(s1.live_bytes, s0.live_bytes + 500);
  EXPECT_EQ(s1.peak_bytes, s0.live_bytes + 1500);
  reset_device_allocation_peak();
  EXPECT_EQ(device_allocation_stats().peak_bytes, s0.live_bytes + 500);
  note_device_free(500);
  EXPECT_EQ(device_allocation_stats().live_bytes, s0.live_bytes);
}

TEST(GpuAllocationStats, DeviceBuffersAreCountedExactly) {
  reset_device_allocation_peak();
  const uint64_t live0 = device_allocation_stats().live_bytes;
  {
    DeviceBuffer a(3 << 20);
    DeviceBuffer b(1 << 20);
    EXPECT_EQ(device_allocation_stats().live_bytes, live0 + (4 << 20));
    a = DeviceBuffer(1 << 20); // the old 3 MiB is freed by the move-assignment
    EXPECT_EQ(device_allocation_stats().live_bytes, live0 + (2 << 20));
    DeviceBuffer c = std::move(b); // a move allocates nothing
    EXPECT_EQ(device_allocation_stats().live_bytes, live0 + (2 << 20));
  }
  AllocationStats s = device_allocation_stats();
  EXPECT_EQ(s.live_bytes, live0);
  EXPECT_EQ(s.peak_bytes, live0 + (5 << 20)) << "3 + 1 live, then the new 1 before the 3 is freed";
}
