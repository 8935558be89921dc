// Compile-only checks of the device library through NVRTC with the embedded headers (no GPU):
// every wrapper instantiates for sm_90a (and the sm_80 subset for sm_80), ptxas accepts the
// result, the PTX holds the intended instructions, each header stands alone, the library adds
// little compile time, and the generated wgmma wrappers match their generator.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <regex>
#include <string>

#include "DeviceTestKernels.h"
#include "runtime/DeviceHeaders.h"
#include "runtime/Nvrtc.h"
#include "tilepilot/error.h"

namespace {

using tp::rt::CompileOutput;
using tp::rt::nvrtc_compile;

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1))
    ++n;
  return n;
}

void expect_instructions(const CompileOutput& out, std::initializer_list<const char*> needles) {
  for (const char* n : needles)
    EXPECT_GT(count(out.ptx, n), 0) << "PTX lacks `" << n << "`";
}

// Best-of-three NVRTC wall time, so that a busy machine does not fail the bound.
double best_compile_seconds(const std::string& source, const std::string& arch) {
  double best = 1e9;
  for (int i = 0; i < 3; ++i)
    best = std::min(best, nvrtc_compile(source, "timing", arch, {}).seconds);
  return best;
}

TEST(DeviceCompile, EveryWrapperCompilesForSm90a) {
  const CompileOutput out =
      nvrtc_compile(tp::device_test::kSm90AllWrappers, "all_sm90", "sm_90a", {});
  EXPECT_FALSE(out.cubin.empty()) << "ptxas produced no cubin";
  for (int n : {16, 32, 64, 96, 128, 192, 256})
    for (const char* t : {"bf16.bf16", "f16.f16"}) {
      const std::string m =
          "wgmma.mma_async.sync.aligned.m64n" + std::to_string(n) + "k16.f32." + t;
      // Two SS and two RS calls per (N, type) in all_wgmma (all_sm90 adds one m64n128 bf16);
      // the RS form has a {a0..a3} vector operand.
      EXPECT_GE(count(out.ptx, m), 4) << m;
      const std::regex rs(m + R"(\s*\{[^}]*\},\s*\{%r\d+, %r\d+, %r\d+, %r\d+\})");
      EXPECT_EQ(std::distance(std::sregex_iterator(out.ptx.begin(), out.ptx.end(), rs),
                              std::sregex_iterator()),
                2)
          << m << " RS";
    }
  expect_instructions(
      out, {"wgmma.fence.sync.aligned",
            "wgmma.commit_group.sync.aligned",
            "wgmma.wait_group.sync.aligned 0",
            "wgmma.wait_group.sync.aligned 1",
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
            "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes",
            "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes",
            "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group",
            "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group",
            "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group",
            "cp.async.bulk.commit_group",
            "cp.async.bulk.wait_group.read 0",
            "cp.async.bulk.wait_group 0",
            "prefetch.tensormap",
            "mbarrier.init.shared::cta.b64",
            "mbarrier.inval.shared::cta.b64",
            "mbarrier.arrive.shared::cta.b64",
            "mbarrier.arrive.expect_tx.shared::cta.b64",
            "mbarrier.expect_tx.relaxed.cta.shared::cta.b64",
            "mbarrier.arrive.shared::cluster.b64",
            "mbarrier.try_wait.parity.shared::cta.b64",
            "fence.mbarrier_init.release.cluster",
            "fence.proxy.async.shared::cta",
            "fence.proxy.async;",
            "fence.acq_rel.cta",
            "fence.acq_rel.cluster",
            "fence.acq_rel.gpu",
            "setmaxnreg.inc.sync.aligned.u32 232",
            "setmaxnreg.dec.sync.aligned.u32 40",
            "stmatrix.sync.aligned.m8n8.x1.shared.b16",
            "stmatrix.sync.aligned.m8n8.x2.shared.b16",
            "stmatrix.sync.aligned.m8n8.x4.shared.b16",
            "stmatrix.sync.aligned.m8n8.x1.trans.shared.b16",
            "stmatrix.sync.aligned.m8n8.x2.trans.shared.b16",
            "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
            "barrier.cluster.arrive.release",
            "barrier.cluster.arrive.relaxed",
            "barrier.cluster.wait.acquire",
            "mapa.shared::cluster.u32",
            "%cluster_ctarank",
            "%cluster_nctarank",
            "elect.sync",
            "cvt.rn.bf16x2.f32",
            "cvt.rn.f16x2.f32"});
}

TEST(DeviceCompile, Sm80SubsetCompilesForSm80AndSm90a) {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    SCOPED_TRACE(arch);
    const CompileOutput out =
        nvrtc_compile(tp::device_test::kSm80AllWrappers, "all_sm80", arch, {});
    EXPECT_FALSE(out.cubin.empty());
    expect_instructions(out, {"cp.async.cg.shared.global",
                              "cp.async.ca.shared.global",
                              "cp.async.commit_group",
                              "cp.async.wait_group 1",
                              "cp.async.wait_all",
                              "ldmatrix.sync.aligned.m8n8.x1.shared.b16",
                              "ldmatrix.sync.aligned.m8n8.x2.shared.b16",
                              "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
                              "ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16",
                              "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16",
                              "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
                              "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
                              "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
                              "ex2.approx.ftz.f32",
                              "rcp.approx.ftz.f32",
                              "rsqrt.approx.ftz.f32",
                              "max.f32",
                              "min.f32",
                              "shfl.sync.bfly.b32",
                              "shfl.sync.idx.b32",
                              "shfl.sync.down.b32",
                              "%laneid",
                              "bar.sync",
                              "bar.arrive",
                              "bar.warp.sync",
                              "cvt.rn.bf16x2.f32",
                              "cvt.rn.f16x2.f32",
                              "cvt.rn.bf16.f32",
                              "cvt.rn.f16.f32",
                              "cvt.f32.f16",
                              "st.shared.v4.b32",
                              "ld.shared.v4.b32"});
  }
}

// The sm_90 layer must stay out of sm_80 builds (the umbrella includes it for sm_90+ only).
TEST(DeviceCompile, Sm90WrappersAreAbsentForSm80) {
  const std::string src = R"(#include "tilepilot_device.cuh"
extern "C" __global__ void k(float* o) { tp::warpgroup::fence(); }
)";
  EXPECT_THROW(nvrtc_compile(src, "sm80_has_no_wgmma", "sm_80", {}), tp::UserError);
}

// The GPU test kernels build everywhere, so the GPU machine only has to run them; the GEMM
// uses no local memory and keeps its wgmma pipelined (no ptxas serialization warning).
TEST(DeviceCompile, GpuTestKernelsCompile) {
  const CompileOutput wg = nvrtc_compile(tp::device_test::kWgmmaTests, "wgmma_tests", "sm_90a", {});
  EXPECT_FALSE(wg.cubin.empty());
  for (const char* arch : {"sm_80", "sm_90a"})
    EXPECT_FALSE(nvrtc_compile(tp::device_test::kWarpMmaTests, "warp_mma", arch, {}).cubin.empty());
  const CompileOutput gemm = nvrtc_compile(tp::device_test::kGemmPipelined, "gemm", "sm_90a", {});
  EXPECT_FALSE(gemm.cubin.empty());
  EXPECT_EQ(count(gemm.log, "serialized"), 0) << gemm.log;
  EXPECT_NE(gemm.log.find("0 bytes spill stores, 0 bytes spill loads"), std::string::npos)
      << gemm.log;
}

// Cold compile of a whole pipelined wgmma GEMM stays under a second (the headline budget), and
// including the library costs a trivial kernel little.
TEST(DeviceCompile, GemmColdCompileUnderOneSecond) {
  const double gemm = best_compile_seconds(tp::device_test::kGemmPipelined, "sm_90a");
  RecordProperty("gemm_compile_ms", static_cast<int>(gemm * 1000));
  std::printf("pipelined wgmma GEMM: NVRTC %.0f ms (best of 3)\n", gemm * 1000);
  EXPECT_LT(gemm, 1.0);

  const std::string body = "extern \"C\" __global__ void k(float* o) { o[threadIdx.x] *= 2.f; }\n";
  const double bare = best_compile_seconds(body, "sm_90a");
  const double with_lib =
      best_compile_seconds("#include \"tilepilot_device.cuh\"\n" + body, "sm_90a");
  std::printf("trivial kernel: %.0f ms bare, %.0f ms with tilepilot_device.cuh\n", bare * 1000,
              with_lib * 1000);
  EXPECT_LT(with_lib - bare, 0.25) << "the device library got expensive to parse";
}

// NVRTC declares the CUDA math functions globally; `using namespace tp;` must not make them
// ambiguous (the library's names are distinct: maxf, imax, fast_rsqrt, ...).
TEST(DeviceCompile, UsingNamespaceTpKeepsCudaMathUnambiguous) {
  const std::string src = R"(#include "tilepilot_device.cuh"
using namespace tp;
extern "C" __global__ void k(float* o, int* p) {
  o[0] = max(o[1], 2.f) + min(o[2], 1.f) + rsqrt(o[3]) + exp2f(o[4]) + fmaxf(o[5], o[6]);
  p[0] = max(p[1], 3) + min(p[2], 4) + imax(p[3], 5);
  o[7] = maxf(o[8], fast_exp2(o[9]));
}
)";
  EXPECT_FALSE(nvrtc_compile(src, "using_tp", "sm_90a", {}).cubin.empty());
}

// Every header compiles on its own, through NVRTC with nothing but the embedded headers.
TEST(DeviceCompile, EachHeaderIsSelfContained) {
  const auto& headers = tp::rt::device_headers();
  ASSERT_GE(headers.size(), 20u) << "device headers are not embedded";
  for (const auto& [name, text] : headers) {
    SCOPED_TRACE(name);
    EXPECT_EQ(text.rfind("//", 0), 0u) << "a device header starts with a comment saying what it is";
    const std::string src = "#include \"" + name + "\"\n__global__ void k() {}\n";
    EXPECT_NO_THROW(nvrtc_compile(src, "self_contained.cu", "sm_90a", {}));
  }
}

TEST(DeviceCompile, GeneratedWgmmaWrappersAreUpToDate) {
  if (std::system("python3 --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
  const std::string cmd =
      std::string("python3 ") + TILEPILOT_SOURCE_DIR + "/scripts/gen_wgmma.py --check";
  EXPECT_EQ(std::system(cmd.c_str()), 0)
      << "device/arch/sm90/wgmma_ops.cuh differs from scripts/gen_wgmma.py's output";
}

} // namespace
