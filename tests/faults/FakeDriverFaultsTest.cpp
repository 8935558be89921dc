// What a GPU fault or device out-of-memory does end to end, on a machine without a GPU: the
// fake driver (fake_cuda/FakeCuda.cpp, loaded in place of libcuda.so.1) fails one chosen call.
// The CLI tests start `tilepilot` with it; the dispatcher tests run in this test binary,
// started again with it (a process keeps the driver it loaded first). This
// folder is not a src/ area: it checks how the runtime, tuner, pilot, dispatcher and CLI
// behave together when the driver fails.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <algorithm>

#include <cstdio>
#include <cstdlib>

#include "FakeDriverChild.h"
#include "RunCli.h"
#include "ops/Operator.h"
#include "runtime/DeviceBuffer.h"
#include "runtime/Driver.h"
#include "tilepilot/device_error.h"
#include "tilepilot/dispatch.h"

using namespace tp;
namespace fs = std::filesystem;

namespace {

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

/// `tilepilot args` on the fake driver, with `fail` ("cuCtxSynchronize=700") injected.
tp::testing::CliResult run_faulty(const std::string& args, const std::string& fail,
                                  const std::string& extra_env = "") {
  return tp::testing::run_cli(args, std::string("LD_LIBRARY_PATH=") + TILEPILOT_FAKE_CUDA_DIR +
                                        " TILEPILOT_FAKE_CU_FAIL=" + fail + " " + extra_env);
}

std::string temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("tp-faults-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

using tp::testing::FailFn;
using tp::testing::on_fake_driver;

const char* kShape = "--shape M=64,N=64,K=64";

} // namespace

TEST(FakeDriverCli, AFaultAtTheSyncExits4NamingTheKernelAndHowToReproduce) {
  auto r = run_faulty(std::string("check gemm --backend cuda ") + kShape, "cuCtxSynchronize=700");
  EXPECT_EQ(r.rc, 4) << r.out;
  EXPECT_TRUE(has(r.out, "tilepilot check: error: the GPU stopped a kernel: cuCtxSynchronize "
                         "reported CUDA_ERROR_ILLEGAL_ADDRESS"))
      << r.out;
  EXPECT_TRUE(has(r.out, "The last kernel TilePilot launched before this was 'gemm_nn' (grid "))
      << r.out;
  EXPECT_TRUE(has(r.out, "The CUDA context is lost")) << r.out;
  EXPECT_TRUE(has(r.out, "compute-sanitizer --tool memcheck ")) << r.out;
  EXPECT_TRUE(has(r.out, " check gemm --backend cuda --shape M=64,N=64,K=64")) << r.out;
  EXPECT_FALSE(has(r.out, "internal error")) << r.out;
}

TEST(FakeDriverCli, OutOfDeviceMemoryExits2WithTheBytes) {
  auto r = run_faulty(std::string("check gemm --backend cuda ") + kShape, "cuMemAlloc=2");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_TRUE(has(r.out, "error: out of device memory: cuMemAlloc of ")) << r.out;
  EXPECT_TRUE(has(r.out, " bytes) failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory) on device 0; "
                         "1.00 GiB of 4.00 GiB is free"))
      << r.out;
}

TEST(FakeDriverCli, TuneStopsAtTheFaultStoresNothingAndExits4) {
  const std::string db = temp_dir("tune-db");
  auto r = run_faulty(std::string("tune gemm ") + kShape +
                          " --space 'bm=64,bn=64|128,stages=2,threads=128,swizzle=0,cluster=1'",
                      "cuEventSynchronize=700", "TILEPILOT_TUNE_DB=" + db);
  EXPECT_EQ(r.rc, 4) << r.out;
  EXPECT_TRUE(has(r.out, "run_failed")) << r.out;
  EXPECT_TRUE(has(r.out, "not measured: the GPU context was lost when ")) << r.out;
  EXPECT_TRUE(has(r.out, "tilepilot tune: error: the GPU stopped a kernel: cuEventSynchronize "
                         "reported CUDA_ERROR_ILLEGAL_ADDRESS"))
      << r.out;
  EXPECT_TRUE(fs::is_empty(db)) << "no tuning-db entry after a fault";
  fs::remove_all(db);
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The fault ends the run before anything is written: DIR keeps the earlier run's report, and
// the hidden folder the run was writing is gone.
TEST(FakeDriverCli, APilotThatFaultsLeavesTheEarlierReportAsItWas) {
  const std::string d = temp_dir("pilot");
  std::ofstream(d + "/spec.yaml") << "operator: gemm\ndevice: sm_90a\ndtypes: [bf16]\nshapes:\n"
                                     "  representative:\n    - {M: 64, N: 64, K: 64}\n"
                                     "reference: framework\ntolerance: {atol: 2e-2, rtol: 2e-2}\n"
                                     "objective: {metric: weighted_latency, min_speedup: 1.1}\n"
                                     "memory_limit_mb: 512\nmetrics: [correctness, warm, memory]\n"
                                     "fallback: required\n";
  const std::string args = "pilot " + d + "/spec.yaml --out " + d + "/out";
  // The fake's kernels compute nothing, so this first run fails its correctness check: a
  // complete report all the same.
  auto first = run_faulty(args, "none=0");
  ASSERT_EQ(first.rc, 1) << first.out;
  const std::string report = read(d + "/out/report.json");
  ASSERT_FALSE(report.empty());
  auto r = run_faulty(args, "cuCtxSynchronize=700");
  EXPECT_EQ(r.rc, 4) << r.out;
  EXPECT_TRUE(has(r.out, "tilepilot pilot: error: the GPU stopped a kernel: ")) << r.out;
  EXPECT_TRUE(has(r.out, "checking gemm K=64,M=64,N=64,layout=nn config ")) << r.out;
  EXPECT_EQ(read(d + "/out/report.json"), report);
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(d))
    entries.push_back(e.path().filename().string());
  std::sort(entries.begin(), entries.end());
  EXPECT_EQ(entries, (std::vector<std::string>{"out", "spec.yaml"}));
  fs::remove_all(d);
}

TEST(FakeDriverDispatch, OutOfMemoryAtAPinnedLaunchFallsBackAndIsCounted) {
  FailFn fail = on_fake_driver();
  if (!fail) return; // the child ran it
  const ops::Problem p =
      ops::find_operator("gemm").parse({{"M", "64"}, {"N", "64"}, {"K", "64"}}, DType::bf16);
  ops::DispatchOptions o;
  o.disable_libraries = {"cuBLASLt"}; // the fallback is the unfused reference kernel
  ops::Dispatcher d(o);
  d.pin("gemm", {"NVIDIA H200", "sm_90a"}, {{p, ops::default_config(p, "sm_90a")}});
  rt::DeviceBuffer a(64 * 64 * 2), b(64 * 64 * 2), c(64 * 64 * 2);
  ops::DeviceView A{a.ptr(), DType::bf16, {64, 64}}, B{b.ptr(), DType::bf16, {64, 64}},
      C{c.ptr(), DType::bf16, {64, 64}};
  fail("cuLaunchKernel", 2, 1); // the pinned kernel's launch
  d.gemm(A, B, C);
  ops::OpCounters n = d.counters("gemm");
  EXPECT_EQ(n.pinned, 0);
  EXPECT_EQ(n.count(ops::FallbackReason::device_out_of_memory), 1);
  EXPECT_EQ(n.fallbacks(), 1);
  fail("", 0, 0);
  d.gemm(A, B, C); // memory is back: the bucket was not marked broken
  n = d.counters("gemm");
  EXPECT_EQ(n.pinned, 1);
  EXPECT_EQ(n.fallbacks(), 1);
  EXPECT_TRUE(has(d.summary(), "device_out_of_memory 1")) << d.summary();
}

TEST(FakeDriverDispatch, AStickyFaultIsAClearErrorAndNeverFallsBack) {
  FailFn fail = on_fake_driver();
  if (!fail) return; // the child ran it
  const ops::Problem p =
      ops::find_operator("gemm").parse({{"M", "64"}, {"N", "64"}, {"K", "64"}}, DType::bf16);
  ops::Dispatcher d;
  d.pin("gemm", {"NVIDIA H200", "sm_90a"}, {{p, ops::default_config(p, "sm_90a")}});
  rt::DeviceBuffer a(64 * 64 * 2), b(64 * 64 * 2), c(64 * 64 * 2);
  ops::DeviceView A{a.ptr(), DType::bf16, {64, 64}}, B{b.ptr(), DType::bf16, {64, 64}},
      C{c.ptr(), DType::bf16, {64, 64}};
  d.gemm(A, B, C);
  fail("cuLaunchKernel", 700, 1); // an earlier kernel's fault, reported at this launch
  try {
    d.gemm(A, B, C);
    FAIL() << "no exception";
  } catch (const DeviceFault& e) {
    EXPECT_EQ(e.cu_error(), "CUDA_ERROR_ILLEGAL_ADDRESS");
    EXPECT_TRUE(has(e.what(), "'gemm_nn' (grid ")) << e.what();
    EXPECT_TRUE(has(e.what(), "dispatched device|")) << e.what();
  }
  ops::OpCounters n = d.counters("gemm");
  EXPECT_EQ(n.pinned, 1);
  EXPECT_EQ(n.fallbacks(), 0);
  fail("", 0, 0);
}
