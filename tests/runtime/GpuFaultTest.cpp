// A kernel that really traps, on the GPU. The process gets a DeviceFault that names the kernel
// and says the context is lost; a later GPU call in that process is a DeviceFault too; and the
// test binary itself, which ran the trap in a child process of its own, still works. The child
// is this binary started again (a forked child must not touch its parent's CUDA state).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

#include "runtime/DeviceBuffer.h"
#include "runtime/DeviceFaults.h"
#include "runtime/Driver.h"
#include "runtime/Jit.h"
#include "runtime/Launch.h"
#include "tilepilot/device_error.h"
#include "tilepilot/runtime.h"

using namespace tp;

namespace {

const char* kTrapSource = R"(extern "C" __global__ void tp_test_trap_now() { __trap(); })";

/// In the child: launches the trapping kernel and reports what each step raised, one line each.
void trap_and_report() {
  auto info = rt::device_info(rt::selected_device_ordinal());
  ASSERT_TRUE(info.has_value());
  rt::JitKernel k = rt::jit_load(kTrapSource, "tp_test_trap_now", "test trap", info->arch, {},
                                 /*bypass_cache=*/true);
  rt::LaunchConfig c;
  try {
    rt::launch(k.fn, c, nullptr);
    rt::note_launch("tp_test_trap_now", c); // as CudaKernel names its launches
    rt::check_cu(rt::driver().cuCtxSynchronize(), "cuCtxSynchronize");
    std::printf("RESULT no-fault\n");
  } catch (const DeviceFault& e) {
    std::printf("RESULT fault %s\nMESSAGE %s\n", e.cu_error().c_str(), e.what());
  }
  try {
    rt::DeviceBuffer b(1024);
    std::printf("AFTER allocated\n");
  } catch (const DeviceFault& e) {
    std::printf("AFTER fault %s\n", e.cu_error().c_str());
  } catch (const std::exception& e) {
    std::printf("AFTER other %s\n", e.what());
  }
  std::fflush(stdout);
}

} // namespace

TEST(GpuFault, ATrappingKernelIsADeviceFaultAndTheProcessAroundItStillWorks) {
  if (std::getenv("TILEPILOT_TRAP_CHILD")) return trap_and_report();
  std::string cmd = "TILEPILOT_TRAP_CHILD=1 /proc/" + std::to_string(::getpid()) +
                    "/exe --gtest_filter=GpuFault.* 2>&1";
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;)
    out.append(buf, n);
  ::pclose(p);
  EXPECT_NE(out.find("RESULT fault CUDA_ERROR_"), std::string::npos) << out;
  EXPECT_NE(out.find("tp_test_trap_now"), std::string::npos) << "the message names the kernel\n"
                                                             << out;
  EXPECT_NE(out.find("AFTER fault"), std::string::npos) << "the context stays lost\n" << out;
  // This process never touched the trapped context: it still allocates and synchronizes.
  rt::DeviceBuffer b(1 << 20);
  rt::ensure_context();
  EXPECT_NO_THROW(rt::check_cu(rt::driver().cuCtxSynchronize(), "cuCtxSynchronize"));
}
