// Environment capture never throws and records what it could not find.
#include <cctype>
#include <cuda.h>
#include <gtest/gtest.h>

#include "RuntimeTestUtil.h"
#include "runtime/Environment.h"

using namespace tp::rt;

TEST(Environment, CapturesVersionsWithoutAGpu) {
  EnvironmentInfo e;
  ASSERT_NO_THROW(e = capture_environment());
  EXPECT_EQ(e.tilepilot_version, TILEPILOT_VERSION);
  EXPECT_FALSE(e.git_commit.empty());
  EXPECT_FALSE(e.host_compiler.empty());
  EXPECT_FALSE(e.os.empty());
  EXPECT_EQ(e.cuda_toolkit,
            std::to_string(CUDA_VERSION / 1000) + "." + std::to_string((CUDA_VERSION % 1000) / 10));
  EXPECT_TRUE(std::isdigit(e.nvrtc[0])) << e.nvrtc; // NVRTC is present on every build machine
  if (e.gpus.empty()) {
    EXPECT_EQ(e.gpu_note.rfind("no GPU: ", 0), 0u) << e.gpu_note;
  } else {
    EXPECT_TRUE(std::isdigit(e.driver[0])) << e.driver;
  }
  for (const std::string* lib : {&e.cublaslt, &e.cudnn})
    EXPECT_TRUE(std::isdigit((*lib)[0]) || lib->rfind("not found: ", 0) == 0) << *lib;
}

TEST(Environment, NoDriverIsRecordedNotThrown) {
  if (driver_available()) GTEST_SKIP() << "a CUDA driver is present";
  EnvironmentInfo e = capture_environment();
  EXPECT_EQ(e.driver.rfind("not found: no CUDA driver was found", 0), 0u) << e.driver;
  EXPECT_TRUE(e.gpus.empty());
  EXPECT_NE(e.gpu_note.find("libcuda.so.1"), std::string::npos) << e.gpu_note;
}

TEST(Environment, JsonAndTextCarryEveryField) {
  EnvironmentInfo e = capture_environment();
  nlohmann::json j = to_json(e);
  for (const char* k : {"tilepilot_version", "git_commit", "host_compiler", "os", "cuda_toolkit",
                        "nvrtc", "driver", "gpus", "cublaslt", "cudnn"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_TRUE(j["gpus"].is_array());
  EXPECT_EQ(j.contains("gpu_note"), e.gpus.empty());
  std::string text = to_text(e);
  for (const char* k : {"tilepilot", "nvrtc", "driver", "cublaslt", "cudnn"})
    EXPECT_NE(text.find(k), std::string::npos) << k;
}

TEST(Environment, CudnnPathOverrideIsHonoured) {
  tp::rt::test::ScopedEnv env("TILEPILOT_CUDNN_PATH", "/nonexistent/libcudnn.so.9");
  std::string v = cudnn_version();
  EXPECT_EQ(v.rfind("not found: ", 0), 0u) << v;
  EXPECT_NE(v.find("/nonexistent/libcudnn.so.9"), std::string::npos) << v;
}

TEST(Environment, DeviceInfoJsonHasArchAndMemory) {
  DeviceInfo d;
  d.name = "NVIDIA H200";
  d.cc_major = 9;
  d.arch = "sm_90a";
  d.sm_count = 132;
  d.total_memory_bytes = uint64_t(141) << 30;
  nlohmann::json j = to_json(d);
  EXPECT_EQ(j["arch"], "sm_90a");
  EXPECT_EQ(j["compute_capability"], "9.0");
  EXPECT_EQ(j["total_memory_bytes"], uint64_t(141) << 30);
}
