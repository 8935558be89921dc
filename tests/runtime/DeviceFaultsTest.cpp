// How failed driver calls are reported (runtime/DeviceFaults.h), by feeding check_cu() the
// CUresult a driver would return: every sticky error is a DeviceFault that names the call, the
// error, the last kernel launched (and what it ran for), says the context is lost and how to
// reproduce; out of memory is a DeviceOutOfMemory (a UserError) with the bytes asked for; any
// other error stays a plain UserError naming the call.
#include <gtest/gtest.h>

#include "runtime/DeviceFaults.h"
#include "runtime/Driver.h"
#include "runtime/Launch.h"

using namespace tp;
using namespace tp::rt;

namespace {

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

LaunchConfig launch_config() {
  LaunchConfig c;
  c.grid = {4, 2, 1};
  c.block = {128, 1, 1};
  c.shared_bytes = 49152;
  return c;
}

const CUresult kSticky[] = {CUDA_ERROR_ILLEGAL_ADDRESS,
                            CUDA_ERROR_ILLEGAL_INSTRUCTION,
                            CUDA_ERROR_MISALIGNED_ADDRESS,
                            CUDA_ERROR_HARDWARE_STACK_ERROR,
                            CUDA_ERROR_LAUNCH_FAILED,
                            CUDA_ERROR_LAUNCH_TIMEOUT,
                            CUDA_ERROR_ASSERT,
                            CUDA_ERROR_INVALID_PC,
                            CUDA_ERROR_INVALID_ADDRESS_SPACE,
                            CUDA_ERROR_ECC_UNCORRECTABLE};

} // namespace

TEST(DeviceFaults, EveryStickyErrorIsADeviceFaultNamingTheKernelAndItsConfig) {
  forget_last_launch();
  {
    LaunchContext ctx("gemm M=64,N=64,K=64 config bm=64,bn=64");
    note_launch("gemm_nn", launch_config());
  }
  for (CUresult r : kSticky) {
    EXPECT_EQ(classify(r), CuFailure::sticky_fault) << int(r);
    try {
      check_cu(r, "driver().cuStreamSynchronize(stream_)");
      ADD_FAILURE() << int(r) << ": no exception";
    } catch (const DeviceFault& e) {
      const std::string m = e.what();
      EXPECT_EQ(e.cu_error(), known_cu_error_name(r));
      EXPECT_EQ(e.kernel(), "gemm_nn");
      EXPECT_TRUE(has(m, std::string("cuStreamSynchronize reported ") + known_cu_error_name(r)))
          << m;
      EXPECT_TRUE(has(m, "'gemm_nn' (grid 4x2x1, block 128x1x1, 49152 B dynamic shared memory; "
                         "gemm M=64,N=64,K=64 config bm=64,bn=64)"))
          << m;
      EXPECT_TRUE(has(m, "The CUDA context is lost")) << m;
      EXPECT_TRUE(has(m, "start a new process")) << m;
      EXPECT_TRUE(has(m, "compute-sanitizer --tool memcheck ")) << m; // then this test's argv
      EXPECT_TRUE(has(m, "tilepilot repro")) << m;
    } catch (const std::exception& e) {
      ADD_FAILURE() << int(r) << ": not a DeviceFault: " << e.what();
    }
  }
}

TEST(DeviceFaults, TheContextOfALaunchEndsWithItsScope) {
  forget_last_launch();
  { LaunchContext ctx("tuning candidate bm=128"); }
  note_launch("swiglu", launch_config());
  try {
    check_cu(CUDA_ERROR_LAUNCH_FAILED, "cuCtxSynchronize()");
    FAIL() << "no exception";
  } catch (const DeviceFault& e) {
    EXPECT_TRUE(has(e.what(), "'swiglu' (grid 4x2x1, block 128x1x1, 49152 B dynamic shared "
                              "memory)"))
        << e.what();
    EXPECT_FALSE(has(e.what(), "tuning candidate")) << e.what();
  }
}

TEST(DeviceFaults, AFaultWithNoKernelLaunchedBlamesALibraryKernel) {
  forget_last_launch();
  try {
    check_cu(CUDA_ERROR_ILLEGAL_ADDRESS, "cuEventSynchronize(stop_)");
    FAIL() << "no exception";
  } catch (const DeviceFault& e) {
    EXPECT_EQ(e.kernel(), "");
    EXPECT_TRUE(has(e.what(), "No TilePilot kernel was launched before it")) << e.what();
    EXPECT_TRUE(has(e.what(), "cuBLASLt")) << e.what();
  }
}

TEST(DeviceFaults, OutOfMemoryIsAUserErrorWithTheBytesAskedFor) {
  EXPECT_EQ(classify(CUDA_ERROR_OUT_OF_MEMORY), CuFailure::out_of_memory);
  try {
    check_cu_alloc(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc", uint64_t(3) << 30);
    FAIL() << "no exception";
  } catch (const DeviceOutOfMemory& e) {
    EXPECT_EQ(e.requested_bytes(), uint64_t(3) << 30);
    EXPECT_TRUE(has(e.what(), "error: out of device memory: cuMemAlloc of 3.00 GiB (3221225472 "
                              "bytes) failed: CUDA_ERROR_OUT_OF_MEMORY"))
        << e.what();
    EXPECT_TRUE(has(e.what(), "Use smaller shapes")) << e.what();
  }
  // At a launch the bytes are not known: the message does not invent a number.
  try {
    check_cu(CUDA_ERROR_OUT_OF_MEMORY, "d.cuLaunchKernel(fn, 1, 1, 1, 128, 1, 1, 0, s, a, 0)");
    FAIL() << "no exception";
  } catch (const DeviceOutOfMemory& e) {
    EXPECT_EQ(e.requested_bytes(), 0u);
    EXPECT_TRUE(has(e.what(), "out of device memory: cuLaunchKernel failed: "
                              "CUDA_ERROR_OUT_OF_MEMORY"))
        << e.what();
  }
  EXPECT_THROW(check_cu(CUDA_ERROR_OUT_OF_MEMORY, "cuModuleLoadData"), UserError);
}

TEST(DeviceFaults, OtherErrorsStayPlainUserErrorsNamingTheCall) {
  EXPECT_EQ(classify(CUDA_ERROR_INVALID_VALUE), CuFailure::other);
  // Too many resources requested: the config, not the context; it is not sticky.
  EXPECT_EQ(classify(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES), CuFailure::other);
  try {
    check_cu(CUDA_ERROR_INVALID_VALUE, "driver().cuMemcpyHtoD(ptr_, src, bytes)");
    FAIL() << "no exception";
  } catch (const DeviceOutOfMemory&) {
    FAIL() << "not an out-of-memory error";
  } catch (const UserError& e) {
    EXPECT_TRUE(has(e.what(), "cuMemcpyHtoD failed: ")) << e.what();
  }
  check_cu(CUDA_SUCCESS, "cuInit"); // no throw
}
