// The benchmark harness: statistics, records, the "ours" registry (CPU), and on the GPU (label
// gpu) that a kernel sleeping 1 ms measures about 1 ms while the L2 flush stays outside the timed
// window. Compiled only when bench/ is part of the build (it links the harness into this test).
#ifdef TILEPILOT_HAVE_BENCH
#include <gtest/gtest.h>

#include "BenchHarness.h"
#include "runtime/Driver.h"
#include "runtime/Jit.h"
#include "runtime/Launch.h"
#include "tilepilot/runtime.h"

using namespace tp;
using namespace tp::bench;

TEST(BenchHarness, MedianAndInterquartileRange) {
  Timing t = summarize({5, 1, 4, 2, 3});
  EXPECT_DOUBLE_EQ(t.median_ms, 3);
  EXPECT_DOUBLE_EQ(t.iqr_ms, 2); // Q1 = 2, Q3 = 4
  EXPECT_DOUBLE_EQ(t.min_ms, 1);
  EXPECT_DOUBLE_EQ(t.max_ms, 5);
  Timing even = summarize({1, 2, 3, 4});
  EXPECT_DOUBLE_EQ(even.median_ms, 2.5);
  EXPECT_DOUBLE_EQ(even.iqr_ms, 1.5); // 3.25 - 1.75
  EXPECT_DOUBLE_EQ(summarize({7}).iqr_ms, 0);
  EXPECT_DOUBLE_EQ(tflops(2e12, 1000), 2);
}

TEST(BenchHarness, RecordsCarrySpeedupAndNotes) {
  SideBySide both;
  both.op = "gemm", both.shape = "M=8192,N=8192,K=8192,layout=nn", both.dtype = "bf16";
  both.flops = 2.0 * 8192 * 8192 * 8192;
  both.ours = summarize({2.0, 2.0, 2.0});
  both.ref_name = "cuBLASLt 13.1.0";
  both.ref = summarize({1.5, 1.5});
  ASSERT_TRUE(both.speedup());
  EXPECT_DOUBLE_EQ(*both.speedup(), 0.75);
  nlohmann::json j = to_json(both);
  EXPECT_DOUBLE_EQ(j["ours_ms_median"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["ref_ms_median"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(j["speedup"].get<double>(), 0.75);
  EXPECT_NEAR(j["ref_tflops"].get<double>(), 733.0, 0.1);

  SideBySide ref_only = both;
  ref_only.ours.reset();
  ref_only.ours_note = "not available (no CUDA backend registered for gemm)";
  EXPECT_FALSE(ref_only.speedup());
  j = to_json(ref_only);
  EXPECT_TRUE(j["ours_ms_median"].is_null());
  EXPECT_TRUE(j["speedup"].is_null());
  std::string table = format_table({both, ref_only});
  EXPECT_NE(table.find("0.750x"), std::string::npos) << table;
  EXPECT_NE(table.find("geometric mean speedup: 0.750x"), std::string::npos) << table;
  EXPECT_NE(table.find("ours: not available (no CUDA backend"), std::string::npos) << table;
  EXPECT_NEAR(*geomean_speedup({both, both}), 0.75, 1e-12);
}

TEST(BenchHarness, OursRegistryFindsWhatWasRegistered) {
  EXPECT_EQ(find_ours("test-op-nobody-registers"), nullptr);
  register_ours("test-op", [](const ops::Problem&, std::string* why) -> std::optional<Timed> {
    *why = "no config for this shape";
    return std::nullopt;
  });
  const OursFactory* f = find_ours("test-op");
  ASSERT_NE(f, nullptr);
  std::string why;
  EXPECT_FALSE((*f)(ops::Problem{}, &why));
  EXPECT_EQ(why, "no config for this shape");
}

TEST(GpuBenchHarness, ASleepOfOneMillisecondMeasuresOneMillisecond) {
  std::string why;
  auto info = rt::device_info(rt::selected_device_ordinal(), &why);
  ASSERT_TRUE(info) << why;
  const char* src = R"(
extern "C" __global__ void sleep_ns(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}
)";
  rt::JitKernel k = rt::jit_load(src, "sleep_ns", "bench test sleep_ns", info->arch, {});
  Harness h(TimingOptions{.warmup = 2, .runs = 15});
  auto sleep_for = [&](unsigned long long ns) {
    return [&, ns](CUstream s) mutable {
      void* args[] = {&ns};
      rt::LaunchConfig c;
      c.stream = s;
      rt::launch(k.fn, c, args);
    };
  };
  Timing one = h.time(sleep_for(1000000));
  EXPECT_GT(one.median_ms, 0.95) << "a 1 ms sleep measured " << one.median_ms << " ms";
  EXPECT_LT(one.median_ms, 1.25) << "a 1 ms sleep measured " << one.median_ms << " ms";
  EXPECT_LT(one.iqr_ms, 0.1) << "IQR " << one.iqr_ms << " ms";
  EXPECT_EQ(one.samples_ms.size(), 15u);
  // The 256 MiB flush takes ~0.1 ms; it must not be inside the timed window.
  Timing none = h.time(sleep_for(0));
  EXPECT_LT(none.median_ms, 0.05) << "an empty kernel measured " << none.median_ms
                                  << " ms: is the L2 flush being timed?";
}

TEST(GpuBenchHarness, FillUniformWritesValuesInRange) {
  rt::Stream s;
  rt::DeviceBuffer b(4096 * 2);
  b.memset(0xff);
  fill_uniform(b.ptr(), 4096, DType::bf16, 3, s.get());
  s.synchronize();
  auto bits = b.to_vector<uint16_t>();
  double sum = 0;
  for (uint16_t x : bits) {
    float v = bf16_bits_to_float(x);
    ASSERT_TRUE(v >= -1.0f && v <= 1.0f) << v;
    sum += v;
  }
  EXPECT_LT(std::abs(sum / 4096), 0.05) << "mean of uniform [-1, 1) should be near 0";
}

#endif // TILEPILOT_HAVE_BENCH
