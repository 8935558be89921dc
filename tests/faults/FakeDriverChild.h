// Running a test on the fake CUDA driver (fake_cuda/FakeCuda.cpp) from a test binary that did
// not load it: a process keeps the driver it loaded first, so the test runs again in a child
// started with the fake on LD_LIBRARY_PATH.
#pragma once
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "runtime/Driver.h"

namespace tp::testing {

using FailFn = void (*)(const char*, int, int);

/// The fake driver's injection entry point when this process runs on it, else nullptr.
inline FailFn fake_driver() {
  if (!rt::driver_available()) return nullptr;
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  return h ? reinterpret_cast<FailFn>(dlsym(h, "tilepilot_fake_cu_fail")) : nullptr;
}

/// In a process on the fake driver: its injection entry point. Otherwise runs the current test
/// again in a child on the fake driver, checks that it passed, and returns nullptr.
inline FailFn on_fake_driver() {
  if (FailFn f = fake_driver()) return f;
  if (std::getenv("TILEPILOT_FAKE_CHILD")) {
    ADD_FAILURE() << "the child did not load the fake driver from " << TILEPILOT_FAKE_CUDA_DIR;
    return nullptr;
  }
  const auto* t = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string cmd = std::string("TILEPILOT_FAKE_CHILD=1 LD_LIBRARY_PATH=") +
                    TILEPILOT_FAKE_CUDA_DIR + " /proc/" + std::to_string(::getpid()) +
                    "/exe --gtest_filter=" + t->test_suite_name() + "." + t->name() + " 2>&1";
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[4096];
  for (size_t n; p && (n = std::fread(buf, 1, sizeof buf, p)) > 0;)
    out.append(buf, n);
  int status = p ? ::pclose(p) : -1;
  EXPECT_EQ(status, 0) << out;
  EXPECT_TRUE(out.find("[  PASSED  ] 1 test.") != std::string::npos) << out;
  return nullptr;
}

} // namespace tp::testing
