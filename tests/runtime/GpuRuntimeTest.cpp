// GPU-only runtime checks (ctest label `gpu`, run on the sm_90a test machine): load, launch,
// verify, time, and the messages for out-of-memory and wrong-architecture loads.
#include <gtest/gtest.h>

#include "RuntimeTestUtil.h"
#include "runtime/DeviceBuffer.h"
#include "runtime/Driver.h"
#include "runtime/Environment.h"
#include "runtime/Jit.h"
#include "runtime/Launch.h"
#include "tilepilot/error.h"

using namespace tp;
using namespace tp::rt;

namespace {

DeviceInfo device() {
  std::string why;
  auto info = device_info(selected_device_ordinal(), &why);
  if (!info) throw std::runtime_error("no GPU: " + why);
  return *info;
}

/// Runs scale(x, a, n) on `n` floats 0, 1, 2, ... and returns the result.
std::vector<float> run_scale(const JitKernel& k, int n, float a, CUstream stream = nullptr) {
  std::vector<float> host(n);
  for (int i = 0; i < n; ++i)
    host[i] = float(i);
  DeviceBuffer x = DeviceBuffer::from(host);
  CUdeviceptr p = x.ptr();
  void* args[] = {&p, &a, &n};
  LaunchConfig c;
  c.grid = {unsigned((n + 255) / 256), 1, 1};
  c.block = {256, 1, 1};
  c.stream = stream;
  launch(k.fn, c, args);
  if (stream) TILEPILOT_CU(driver().cuStreamSynchronize(stream));
  return x.to_vector<float>();
}

} // namespace

TEST(GpuRuntime, DeviceInfoDescribesTheGpu) {
  DeviceInfo d = device();
  EXPECT_FALSE(d.name.empty());
  EXPECT_GE(d.cc_major, 8);
  EXPECT_EQ(d.arch, arch_for(d.cc_major, d.cc_minor));
  if (d.cc_major == 9 && d.cc_minor == 0) {
    EXPECT_EQ(d.arch, "sm_90a");
  }
  EXPECT_GT(d.sm_count, 0);
  EXPECT_GT(d.total_memory_bytes, uint64_t(1) << 30);
  EXPECT_GT(d.l2_bytes, 0);
  EXPECT_GE(d.max_shared_per_block_optin, 48 * 1024);
  EXPECT_FALSE(d.driver_version.empty());
  EnvironmentInfo e = capture_environment();
  EXPECT_FALSE(e.gpus.empty());
  EXPECT_TRUE(e.gpu_note.empty()) << e.gpu_note;
}

TEST(GpuRuntime, LoadsLaunchesAndComputes) {
  std::string arch = device().arch;
  std::string src = test::scale_kernel(test::unique_tag());
  JitKernel k = jit_load(src, "scale", "ir scale", arch, {});
  ASSERT_NE(k.fn, nullptr);
  EXPECT_FALSE(k.cache_hit);
  std::vector<float> y = run_scale(k, 1000, 2.0f);
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(y[i], 2.0f * i + 1.0f) << i;

  JitKernel warm = jit_load(src, "scale", "ir scale", arch, {});
  EXPECT_TRUE(warm.cache_hit && warm.in_process_hit);
  EXPECT_EQ(warm.fn, k.fn);
  EXPECT_EQ(warm.nvrtc_seconds, 0);
}

TEST(GpuRuntime, DeviceLibraryKernelRuns) {
  std::string src = "#include \"tilepilot_device.cuh\"\n" + test::scale_kernel("devlib");
  JitKernel k = jit_load(src, "scale", "ir devlib", device().arch, {});
  std::vector<float> y = run_scale(k, 64, 3.0f);
  EXPECT_EQ(y[10], 31.0f);
}

TEST(GpuRuntime, StreamTransfersAndEventTiming) {
  JitKernel k = jit_load(test::scale_kernel("timing"), "scale", "ir timing", device().arch, {});
  Stream s;
  int n = 1 << 20;
  DeviceBuffer x(n * sizeof(float)), y(n * sizeof(float));
  x.memset32(0x3f800000u, s.get()); // 1.0f
  y.copy_from(x, x.bytes(), s.get());
  CUdeviceptr p = y.ptr();
  float a = 0.5f;
  void* args[] = {&p, &a, &n};
  LaunchConfig c;
  c.grid = {unsigned(n / 256), 1, 1};
  c.block = {256, 1, 1};
  c.stream = s.get();
  EventTimer t;
  t.start(s.get());
  for (int i = 0; i < 10; ++i)
    launch(k.fn, c, args);
  t.stop(s.get());
  float ms = t.elapsed_ms();
  EXPECT_GT(ms, 0.0f);
  EXPECT_LT(ms, 1000.0f);
  std::vector<float> host(n);
  y.download(host.data(), host.size() * sizeof(float), 0, s.get());
  s.synchronize();
  // 10 times x -> 0.5x + 1 from 1.0 converges towards 2: 2 - 2^-10.
  EXPECT_FLOAT_EQ(host[12345], 2.0f - 1.0f / 1024);
}

TEST(GpuRuntime, LargeDynamicSharedMemoryAndClusters) {
  DeviceInfo d = device();
  std::string src = R"(
extern "C" __global__ void fill_shared(float* out) {
  extern __shared__ float s[];
  s[threadIdx.x] = threadIdx.x;
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = s[blockDim.x - 1 - threadIdx.x];
}
)";
  JitKernel k = jit_load(src, "fill_shared", "ir fill_shared", d.arch, {});
  DeviceBuffer out(4 * 128 * sizeof(float));
  CUdeviceptr p = out.ptr();
  void* args[] = {&p};
  LaunchConfig c;
  c.grid = {4, 1, 1};
  c.block = {128, 1, 1};
  c.shared_bytes = 100 * 1024; // over the 48 KiB default: needs the opt-in
  if (d.cc_major >= 9) c.cluster = {2, 1, 1};
  launch(k.fn, c, args);
  auto v = out.to_vector<float>();
  EXPECT_EQ(v[0], 127.0f);
  EXPECT_EQ(v[3 * 128 + 127], 0.0f);

  c.shared_bytes = unsigned(d.max_shared_per_block_optin) + 1024;
  try {
    launch(k.fn, c, args);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("allows at most"), std::string::npos) << e.what();
  }
}

TEST(GpuRuntime, OutOfMemoryMessageSaysRequestedAndFree) {
  try {
    DeviceBuffer huge(size_t(1) << 50); // 1 PiB
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("out of device memory"), std::string::npos) << msg;
    EXPECT_NE(msg.find("1024.00 TiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("is free"), std::string::npos) << msg;
  }
  DeviceBuffer ok(1 << 20); // the context is still usable
  ok.memset(0);
}

TEST(GpuRuntime, WrongArchitectureLoadSaysWhichArchToUse) {
  DeviceInfo d = device();
  if (d.cc_major != 9) GTEST_SKIP() << "checks an sm_80 cubin on a 9.x device";
  try {
    jit_load(test::scale_kernel("wrong-arch"), "scale", "ir wrong", "sm_80", {});
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("compiled for sm_80"), std::string::npos) << msg;
    EXPECT_NE(msg.find(d.arch), std::string::npos) << msg;
  }
}

TEST(GpuRuntime, MissingEntryIsNamed) {
  try {
    jit_load(test::scale_kernel("entry"), "no_such_kernel", "ir entry", device().arch, {});
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_kernel"), std::string::npos) << e.what();
  }
}
