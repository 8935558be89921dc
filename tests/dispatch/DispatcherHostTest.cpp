// Dispatch on host tensors (no GPU): the pinned kernel runs on the interpreter only inside the
// release's tested matrix; every other case takes the fp64 reference, is counted under its
// reason and logged once per reason.
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>

#include "DispatchTestSupport.h"
#include "codegen/cpu/Interpreter.h"
#include "tilepilot/runtime.h"

using namespace tp;
using namespace tp::ops;
using test::problem;

namespace {

const Config kCpuGemm = {{"bm", 64}, {"bn", 64}, {"bk", 32}, {"stages", 2}, {"threads", 128}};
const Config kCpuAttention = {{"bm", 64}, {"bn", 64}, {"stages", 1}, {"threads", 128}};
const char* kGpu = "NVIDIA H200";

/// Inputs of a gemm problem (seeded) and a poisoned output.
std::vector<HostTensor> gemm_args(const Problem& p, uint64_t seed = 1) {
  return find_operator("gemm").make_args(p, seed);
}

std::string gemm_release(const std::string& name, std::vector<test::ReleaseCase> cases) {
  return test::write_release(test::temp_dir(name), "gemm", "sm_90a", kGpu, cases);
}

bool same_bits(const HostTensor& a, const HostTensor& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.data(), b.data(), a.bytes()) == 0;
}

class DispatchHost : public testing::Test {
protected:
  std::vector<std::string> log;
  Problem in_matrix = problem("gemm", "M=40,N=48,K=64,layout=nt");
  Problem other_shape = problem("gemm", "M=41,N=48,K=64,layout=nt");

  DispatchOptions with_release(const std::string& dir) {
    DispatchOptions o = test::capture_log(&log);
    o.releases = {dir};
    return o;
  }
  /// Runs gemm for `p` through `d`; returns the output.
  HostTensor run(Dispatcher& d, const Problem& p) {
    auto a = gemm_args(p);
    d.gemm(a[0], a[1], a[2], p.options.at("layout"));
    return a[2];
  }
  /// What the fallback (fp64 reference rounded to bf16) gives.
  HostTensor reference(const Problem& p) {
    auto a = gemm_args(p);
    Box all{2, {0, 0}, {p.at("M"), p.at("N")}};
    std::vector<double> r = find_operator("gemm").reference(p, a, all);
    for (int64_t i = 0; i < a[2].numel(); ++i)
      a[2].set(i, r[i]);
    return a[2];
  }
  /// What the pinned kernel on the interpreter gives.
  HostTensor interpreted(const Problem& p, const Config& c) {
    auto a = gemm_args(p);
    cpu::interpret(find_operator("gemm").build(p, c), {&a[0], &a[1], &a[2]});
    return a[2];
  }
};

} // namespace

TEST_F(DispatchHost, NoReleaseRunsTheReferenceCountsEveryCallAndLogsOnce) {
  Dispatcher d(test::capture_log(&log));
  EXPECT_TRUE(same_bits(run(d, in_matrix), reference(in_matrix)));
  run(d, in_matrix);
  run(d, other_shape);
  OpCounters c = d.counters("gemm");
  EXPECT_EQ(c.pinned, 0);
  EXPECT_EQ(c.count(FallbackReason::no_release), 3);
  EXPECT_EQ(c.fallbacks(), 3);
  EXPECT_EQ(c.fallback_impl["fp64 CPU reference"], 3);
  ASSERT_EQ(log.size(), 1u) << "one line per (operator, reason), however many calls";
  EXPECT_NE(log[0].find("no_release"), std::string::npos) << log[0];
  EXPECT_NE(log[0].find("TILEPILOT_RELEASE"), std::string::npos) << "says how to fix: " << log[0];
}

TEST_F(DispatchHost, InsideTheMatrixRunsThePinnedKernelOnTheInterpreter) {
  Config pinned = kCpuGemm;
  pinned["bn"] = 32; // a config the fallback cannot be confused with
  Dispatcher d(with_release(gemm_release("pinned", {{in_matrix, pinned}})));
  HostTensor out = run(d, in_matrix);
  EXPECT_TRUE(same_bits(out, interpreted(in_matrix, pinned)));
  EXPECT_EQ(d.counters("gemm").pinned, 1);
  EXPECT_EQ(d.counters("gemm").fallbacks(), 0);
  EXPECT_TRUE(log.empty());
  DispatchDecision dec = d.decide("gemm", {{"M", "40"}, {"N", "48"}, {"K", "64"}, {"layout", "nt"}},
                                  DType::bf16, false);
  EXPECT_TRUE(dec.pinned);
  EXPECT_EQ(dec.config, pinned);
}

TEST_F(DispatchHost, ShapeOutsideTheMatrixFallsBackAndLogsOncePerReason) {
  Dispatcher d(with_release(gemm_release("shape", {{in_matrix, kCpuGemm}})));
  EXPECT_TRUE(same_bits(run(d, other_shape), reference(other_shape)));
  run(d, problem("gemm", "M=40,N=48,K=64,layout=nn")); // same sizes, another layout
  run(d, in_matrix);
  OpCounters c = d.counters("gemm");
  EXPECT_EQ(c.count(FallbackReason::shape_outside_matrix), 2);
  EXPECT_EQ(c.pinned, 1);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("M=41"), std::string::npos) << "names the first shape: " << log[0];
}

TEST_F(DispatchHost, DtypeOutsideTheMatrix) {
  Dispatcher d(with_release(gemm_release("dtype", {{in_matrix, kCpuGemm}})));
  run(d, problem("gemm", "M=40,N=48,K=64,layout=nt", DType::f16));
  EXPECT_EQ(d.counters("gemm").count(FallbackReason::dtype_outside_matrix), 1);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("f16"), std::string::npos) << log[0];
}

TEST_F(DispatchHost, DeviceMismatchByArchOrByName) {
  std::string dir = gemm_release("device", {{in_matrix, kCpuGemm}});
  for (DeviceIdentity dev :
       {DeviceIdentity{kGpu, "sm_80"}, DeviceIdentity{"NVIDIA H100", "sm_90a"}}) {
    log.clear();
    DispatchOptions o = with_release(dir);
    o.device = dev;
    Dispatcher d(o);
    run(d, in_matrix);
    EXPECT_EQ(d.counters("gemm").count(FallbackReason::device_mismatch), 1) << dev.name;
    ASSERT_EQ(log.size(), 1u);
    EXPECT_NE(log[0].find(dev.arch == "sm_80" ? "sm_80" : "NVIDIA H100"), std::string::npos)
        << log[0];
  }
  DispatchOptions o = with_release(dir);
  o.device = DeviceIdentity{kGpu, "sm_90a"}; // the released device itself
  Dispatcher d(o);
  run(d, in_matrix);
  EXPECT_EQ(d.counters("gemm").pinned, 1);
}

TEST_F(DispatchHost, AShapeThatFailedItsTestFallsBack) {
  Dispatcher d(with_release(gemm_release("failed", {{in_matrix, kCpuGemm, /*passed=*/false}})));
  run(d, in_matrix);
  EXPECT_EQ(d.counters("gemm").count(FallbackReason::failed_test), 1);
}

TEST_F(DispatchHost, TestedButNotPinnedCountsAsOutsideTheMatrix) {
  test::ReleaseCase c{in_matrix, kCpuGemm, true, /*pinned=*/false};
  Dispatcher d(with_release(gemm_release("unpinned", {c})));
  run(d, in_matrix);
  EXPECT_EQ(d.counters("gemm").count(FallbackReason::shape_outside_matrix), 1);
  EXPECT_NE(log.at(0).find("no pinned kernel"), std::string::npos) << log[0];
}

TEST_F(DispatchHost, AShapeThePilotMeasuredFasterOnTheFrameworkRunsTheFramework) {
  test::ReleaseCase slow{in_matrix, kCpuGemm, true, /*pinned=*/false, /*framework_faster=*/0.62};
  test::ReleaseCase fast{other_shape, kCpuGemm};
  Dispatcher d(with_release(gemm_release("routed", {slow, fast})));
  EXPECT_TRUE(same_bits(run(d, in_matrix), reference(in_matrix)));
  EXPECT_TRUE(same_bits(run(d, other_shape), interpreted(other_shape, kCpuGemm)));
  EXPECT_EQ(d.counters("gemm").count(FallbackReason::framework_faster), 1);
  EXPECT_EQ(d.counters("gemm").pinned, 1);
  ASSERT_FALSE(log.empty());
  EXPECT_NE(log.at(0).find("framework_faster"), std::string::npos) << log[0];
  EXPECT_NE(log.at(0).find("the pilot measured vendor faster at shape " + in_matrix.shape_str() +
                           " (the kernel ran at 0.620x)"),
            std::string::npos)
      << log[0];
}

TEST_F(DispatchHost, AConfigThatDoesNotBuildFallsBackOnceAndIsNotRetried) {
  Config bad = kCpuGemm;
  bad["bm"] = 24; // not a multiple of 16: the operator refuses to build it
  Dispatcher d(with_release(gemm_release("compile", {{in_matrix, bad}})));
  EXPECT_TRUE(same_bits(run(d, in_matrix), reference(in_matrix)));
  run(d, in_matrix);
  EXPECT_EQ(d.counters("gemm").count(FallbackReason::compile_failed), 2);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("bm=24"), std::string::npos) << "names the config: " << log[0];
  EXPECT_NE(log[0].find("a multiple of 16"), std::string::npos) << "and why: " << log[0];
  DispatchDecision dec = d.decide("gemm", {{"M", "40"}, {"N", "48"}, {"K", "64"}, {"layout", "nt"}},
                                  DType::bf16, false);
  EXPECT_FALSE(dec.pinned);
  EXPECT_EQ(dec.reason, FallbackReason::compile_failed);
}

TEST_F(DispatchHost, AModifiedReleaseIsInvalidAndSaysWhichFile) {
  std::string dir = gemm_release("modified", {{in_matrix, kCpuGemm}});
  release::write_text(dir + "/pinned.json", "{\"entries\": []}");
  Dispatcher d(with_release(dir));
  run(d, in_matrix);
  EXPECT_EQ(d.counters("gemm").count(FallbackReason::release_invalid), 1);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("pinned.json"), std::string::npos) << log[0];
  // The attention operator had no release at all: that is a different reason.
  auto a = find_operator("attention").make_args(problem("attention", "B=1,H=2,S=8,D=16"), 2);
  d.attention(a[0], a[1], a[2], a[3], false);
  EXPECT_EQ(d.counters("attention").count(FallbackReason::no_release), 1);
}

TEST_F(DispatchHost, AMissingFolderIsInvalidForEveryOperatorWithoutARelease) {
  Dispatcher d(with_release("/nonexistent/tilepilot-release"));
  run(d, in_matrix);
  EXPECT_EQ(d.counters("gemm").count(FallbackReason::release_invalid), 1);
  EXPECT_NE(log.at(0).find("/nonexistent/tilepilot-release"), std::string::npos) << log[0];
}

TEST_F(DispatchHost, ForcedFallbackCanBeSwitchedPerOperator) {
  Dispatcher d(with_release(gemm_release("forced", {{in_matrix, kCpuGemm}})));
  d.force_fallback("gemm", true);
  EXPECT_TRUE(same_bits(run(d, in_matrix), reference(in_matrix)));
  d.force_fallback("gemm", false);
  run(d, in_matrix);
  OpCounters c = d.counters("gemm");
  EXPECT_EQ(c.count(FallbackReason::forced), 1);
  EXPECT_EQ(c.pinned, 1);
  EXPECT_NE(d.summary().find("gemm: 1 pinned, 1 fallback (forced 1, via fp64 CPU reference 1)"),
            std::string::npos)
      << d.summary();
  d.reset_counters();
  EXPECT_EQ(d.counters("gemm").pinned, 0);
  EXPECT_THROW(d.force_fallback("conv", true), UserError);
}

TEST_F(DispatchHost, AttentionPinnedAndFallbackAgree) {
  Problem p = problem("attention", "B=2,H=4,Hkv=2,S=24,D=16,causal=1");
  std::string dir = test::write_release(test::temp_dir("attention"), "attention", "sm_90a", kGpu,
                                        {{p, kCpuAttention}});
  Dispatcher d(with_release(dir));
  auto pinned = find_operator("attention").make_args(p, 5);
  auto fallback = find_operator("attention").make_args(p, 5);
  d.attention(pinned[0], pinned[1], pinned[2], pinned[3], true);
  d.force_fallback("attention", true);
  d.attention(fallback[0], fallback[1], fallback[2], fallback[3], true);
  EXPECT_EQ(d.counters("attention").pinned, 1);
  EXPECT_EQ(d.counters("attention").count(FallbackReason::forced), 1);
  double worst = 0;
  for (int64_t i = 0; i < pinned[3].numel(); ++i)
    worst = std::max(worst, std::fabs(pinned[3].get(i) - fallback[3].get(i)));
  EXPECT_LT(worst, 2e-2);
  // A non-causal call is another problem: outside the matrix.
  d.force_fallback("attention", false);
  d.attention(pinned[0], pinned[1], pinned[2], pinned[3], false);
  EXPECT_EQ(d.counters("attention").count(FallbackReason::shape_outside_matrix), 1);
}

TEST_F(DispatchHost, TwoReleasesForOneOperatorAreAUserError) {
  std::string a = gemm_release("two-a", {{in_matrix, kCpuGemm}});
  std::string b = gemm_release("two-b", {{in_matrix, kCpuGemm}});
  DispatchOptions o;
  o.releases = {a, b};
  EXPECT_THROW(Dispatcher{o}, UserError);
}

TEST_F(DispatchHost, MismatchedTensorsAreUserErrorsNamingTheShapes) {
  Dispatcher d(test::capture_log(&log));
  HostTensor A(DType::bf16, {4, 8}), B(DType::bf16, {9, 6}), C(DType::bf16, {4, 6});
  try {
    d.gemm(A, B, C, "nn");
    FAIL() << "expected a user error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("[9, 6]"), std::string::npos) << e.what();
  }
  HostTensor C32(DType::f32, {4, 6}), B2(DType::bf16, {8, 6});
  EXPECT_THROW(d.gemm(A, B2, C32, "nn"), UserError);
  EXPECT_THROW(d.gemm(A, B2, C, "xx"), UserError);
}

TEST_F(DispatchHost, DeviceCallsWithoutAGpuSayWhatIsMissing) {
  std::string why;
  if (rt::device_count(&why) > 0) GTEST_SKIP() << "this machine has a GPU";
  Dispatcher d(test::capture_log(&log));
  DeviceView A{16, DType::bf16, {4, 8}}, B{16, DType::bf16, {8, 6}}, C{16, DType::bf16, {4, 6}};
  try {
    d.gemm(A, B, C, "nn");
    FAIL() << "expected a user error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("GPU"), std::string::npos) << e.what();
  }
}

TEST_F(DispatchHost, TheFreeFunctionsUseReleasesFromTheEnvironment) {
  // The process-wide dispatcher reads $TILEPILOT_RELEASE once, at first use; no other test in
  // this binary touches it.
  std::string dir = gemm_release("env", {{in_matrix, kCpuGemm}});
  ::setenv("TILEPILOT_RELEASE", ("/nonexistent-first:" + dir).c_str(), 1);
  auto a = gemm_args(in_matrix);
  ops::gemm(a[0], a[1], a[2], "nt");
  EXPECT_TRUE(same_bits(a[2], interpreted(in_matrix, kCpuGemm)));
  EXPECT_EQ(default_dispatcher().counters("gemm").pinned, 1);
  ::unsetenv("TILEPILOT_RELEASE");
}
