// Dispatch on device tensors (label gpu, needs an sm_90a GPU): the pinned kernel through the
// CUDA backend, cuBLASLt / cuDNN as fallbacks, the fp32 GPU references when those are missing,
// NVRTC missing as library_missing, and a device-name mismatch. Every output is checked against
// the fp64 CPU reference; outputs are poisoned (NaN) before each run.
#include <cmath>
#include <gtest/gtest.h>
#include <iostream>

#include "DispatchTestSupport.h"
#include "dispatch/DeviceRun.h"
#include "dispatch/DispatcherImpl.h"
#include "runtime/DeviceBuffer.h"
#include "runtime/Driver.h"

using namespace tp;
using namespace tp::ops;
using test::problem;

namespace {

/// Host arguments on the device; the outputs (`out` index) start as NaN.
struct OnDevice {
  std::vector<rt::DeviceBuffer> bufs;
  std::vector<DeviceView> views;
  OnDevice(const std::vector<HostTensor>& host, int out) {
    for (size_t i = 0; i < host.size(); ++i) {
      bufs.emplace_back(host[i].bytes());
      if (static_cast<int>(i) == out)
        bufs.back().memset(0xff);
      else
        bufs.back().upload(host[i].data(), host[i].bytes());
      views.push_back({bufs.back().ptr(), host[i].dtype(), host[i].shape()});
    }
  }
  void poison(int i) { bufs[i].memset(0xff); }
  HostTensor get(int i) {
    TILEPILOT_CU(rt::driver().cuCtxSynchronize());
    HostTensor h(views[i].dtype, views[i].shape);
    bufs[i].download(h.data(), h.bytes());
    return h;
  }
};

/// Max error against the operator's fp64 reference over every output element; NaN -> inf.
double max_error(const Problem& p, std::vector<HostTensor> args, const HostTensor& got,
                 double* allowed) {
  const Operator& op = find_operator(p.op);
  auto [atol, rtol] = op.tolerance(p.dtype);
  double worst = 0, worst_allowed = 0;
  auto check = [&](const Box& box) {
    std::vector<double> ref = op.reference(p, args, box);
    int64_t base =
        p.op == "gemm" ? 0 : (box.min[0] * p.at("H") + box.min[1]) * p.at("S") * p.at("D");
    for (size_t i = 0; i < ref.size(); ++i) {
      double g = got.get(base + static_cast<int64_t>(i));
      double e = std::isfinite(g) ? std::fabs(g - ref[i]) : INFINITY;
      double lim = atol + rtol * std::fabs(ref[i]);
      if (e - lim > worst - worst_allowed) worst = e, worst_allowed = lim;
    }
  };
  if (p.op == "gemm") {
    check(Box{2, {0, 0}, {p.at("M"), p.at("N")}});
  } else {
    for (int64_t b = 0; b < p.at("B"); ++b)
      for (int64_t h = 0; h < p.at("H"); ++h)
        check(Box{3, {b, h, 0, 0}, {1, 1, p.at("S"), p.at("D")}});
  }
  *allowed = worst_allowed;
  return worst;
}

#define EXPECT_MATCHES_REFERENCE(p, args, got)                                                     \
  do {                                                                                             \
    double lim = 0, err = max_error(p, args, got, &lim);                                           \
    EXPECT_LE(err, lim) << (p).op << " " << (p).shape_str();                                       \
  } while (0)

void gemm_on(Dispatcher& d, OnDevice& g, const Problem& p) {
  d.gemm(g.views[0], g.views[1], g.views[2], p.options.at("layout"));
}

void attention_on(Dispatcher& d, OnDevice& g, const Problem& p) {
  d.attention(g.views[0], g.views[1], g.views[2], g.views[3], p.at("causal") != 0);
}

/// Pins `p` to its operator's default config for `dev`, in memory.
void pin(Dispatcher& d, const Problem& p, DeviceIdentity dev = dispatch::current_device()) {
  Config c = find_operator(p.op).default_config(p, dev.arch);
  dispatch::install_release(d, dispatch::memory_release(p.op, dev, {{p, c}}));
}

} // namespace

TEST(GpuDispatch, PinnedGemmAndCublasLtBothMatchTheReference) {
  std::vector<std::string> log;
  Problem p = problem("gemm", "M=200,N=384,K=512,layout=nt");
  Dispatcher d(test::capture_log(&log));
  pin(d, p);
  auto args = find_operator("gemm").make_args(p, 3);
  OnDevice g(args, 2);
  gemm_on(d, g, p);
  EXPECT_MATCHES_REFERENCE(p, args, g.get(2));
  d.force_fallback("gemm", true);
  g.poison(2);
  gemm_on(d, g, p);
  EXPECT_MATCHES_REFERENCE(p, args, g.get(2));
  OpCounters c = d.counters("gemm");
  EXPECT_EQ(c.pinned, 1);
  EXPECT_EQ(c.count(FallbackReason::forced), 1);
  EXPECT_EQ(c.fallback_impl["cuBLASLt"], 1);
  EXPECT_EQ(log.size(), 1u);
}

TEST(GpuDispatch, PinnedAttentionAndCudnnBothMatchTheReference) {
  std::vector<std::string> log;
  Problem p = problem("attention", "B=2,H=8,Hkv=2,S=200,D=128,causal=1");
  Dispatcher d(test::capture_log(&log));
  pin(d, p);
  auto args = find_operator("attention").make_args(p, 4);
  OnDevice g(args, 3);
  attention_on(d, g, p);
  EXPECT_MATCHES_REFERENCE(p, args, g.get(3));
  d.force_fallback("attention", true);
  g.poison(3);
  attention_on(d, g, p);
  EXPECT_MATCHES_REFERENCE(p, args, g.get(3));
  OpCounters c = d.counters("attention");
  EXPECT_EQ(c.pinned, 1);
  EXPECT_EQ(c.count(FallbackReason::forced), 1);
  for (const auto& l : log)
    std::cout << "  log: " << l << "\n";
}

TEST(GpuDispatch, WithoutCublasLtTheGpuReferenceRunsAndSaysSoOnce) {
  std::vector<std::string> log;
  DispatchOptions o = test::capture_log(&log);
  o.disable_libraries = {"cuBLASLt"};
  Dispatcher d(o);
  Problem p = problem("gemm", "M=77,N=45,K=133,layout=nn");
  auto args = find_operator("gemm").make_args(p, 5);
  OnDevice g(args, 2);
  gemm_on(d, g, p);
  EXPECT_MATCHES_REFERENCE(p, args, g.get(2));
  gemm_on(d, g, p);
  OpCounters c = d.counters("gemm");
  EXPECT_EQ(c.count(FallbackReason::no_release), 2);
  EXPECT_EQ(c.fallback_impl["fp32 GPU reference"], 2);
  int mentions = 0;
  for (const auto& l : log)
    mentions += l.find("cuBLASLt is unavailable") != std::string::npos;
  EXPECT_EQ(mentions, 1);
}

TEST(GpuDispatch, WithoutCudnnTheUnfusedReferenceRuns) {
  std::vector<std::string> log;
  DispatchOptions o = test::capture_log(&log);
  o.disable_libraries = {"cuDNN"};
  Dispatcher d(o);
  Problem p = problem("attention", "B=1,H=4,Hkv=1,S=77,Skv=77,D=64,causal=1");
  auto args = find_operator("attention").make_args(p, 6);
  OnDevice g(args, 3);
  attention_on(d, g, p);
  EXPECT_MATCHES_REFERENCE(p, args, g.get(3));
  EXPECT_EQ(d.counters("attention").fallback_impl["unfused fp32 GPU reference"], 1);
  bool said = false;
  for (const auto& l : log)
    said |= l.find("cuDNN is unavailable") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(GpuDispatch, WithoutNvrtcThePinnedKernelIsALibraryMissingFallback) {
  std::vector<std::string> log;
  DispatchOptions o = test::capture_log(&log);
  o.disable_libraries = {"NVRTC"};
  Problem p = problem("gemm", "M=128,N=128,K=128,layout=nt");
  Dispatcher d(o);
  pin(d, p);
  auto args = find_operator("gemm").make_args(p, 7);
  OnDevice g(args, 2);
  gemm_on(d, g, p);
  EXPECT_MATCHES_REFERENCE(p, args, g.get(2));
  gemm_on(d, g, p);
  EXPECT_EQ(d.counters("gemm").count(FallbackReason::library_missing), 2);
  ASSERT_FALSE(log.empty());
  EXPECT_NE(log[0].find("NVRTC"), std::string::npos) << log[0];
}

TEST(GpuDispatch, AnotherGpuNameIsADeviceMismatch) {
  std::vector<std::string> log;
  Problem p = problem("gemm", "M=128,N=128,K=128,layout=nt");
  DeviceIdentity elsewhere = dispatch::current_device();
  elsewhere.name += " (another board)";
  Dispatcher d(test::capture_log(&log));
  pin(d, p, elsewhere);
  auto args = find_operator("gemm").make_args(p, 8);
  OnDevice g(args, 2);
  gemm_on(d, g, p);
  EXPECT_MATCHES_REFERENCE(p, args, g.get(2));
  EXPECT_EQ(d.counters("gemm").count(FallbackReason::device_mismatch), 1);
}

TEST(GpuDispatch, AReleaseFolderRunsItsPinnedKernel) {
  DeviceIdentity dev = dispatch::current_device();
  Problem p = problem("gemm", "M=256,N=256,K=256,layout=nt");
  std::string dir = test::write_release(test::temp_dir("gpu"), "gemm", dev.arch, dev.name,
                                        {{p, find_operator("gemm").default_config(p, dev.arch)}});
  std::vector<std::string> log;
  DispatchOptions o = test::capture_log(&log);
  o.releases = {dir};
  Dispatcher d(o);
  auto args = find_operator("gemm").make_args(p, 9);
  OnDevice g(args, 2);
  gemm_on(d, g, p);
  EXPECT_MATCHES_REFERENCE(p, args, g.get(2));
  EXPECT_EQ(d.counters("gemm").pinned, 1) << (log.empty() ? "" : log[0]);
}
