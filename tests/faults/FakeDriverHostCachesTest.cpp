// The host-path caches of a dispatched device call (bench/bench_host_path measures them) must
// never answer for a call they do not match: a call with new shapes is routed and bound again,
// a new release's buckets get their own fault text, and a launch that fails its checks leaves
// nothing behind that a later launch reuses. Run on the fake driver (launches do nothing), which
// records each launch's grid and context as a fault report would name them.
#include <gtest/gtest.h>

#include "FakeDriverChild.h"
#include "compile/CudaKernel.h"
#include "dispatch/DispatcherImpl.h"
#include "ops/Operator.h"
#include "ops/gemm/GemmOp.h"
#include "runtime/DeviceBuffer.h"
#include "runtime/DeviceFaults.h"
#include "tilepilot/dispatch.h"

using namespace tp;
using tp::testing::on_fake_driver;

namespace {

const ops::DeviceIdentity kH200{"NVIDIA H200", "sm_90a"};

ops::Problem gemm_problem(int64_t m, int64_t n, int64_t k) {
  return ops::find_operator("gemm").parse(
      {{"M", std::to_string(m)}, {"N", std::to_string(n)}, {"K", std::to_string(k)}}, DType::bf16);
}

/// bf16 device views of these shapes, on buffers that live as long as `bufs`.
std::vector<ops::DeviceView> views(std::vector<rt::DeviceBuffer>& bufs,
                                   const std::vector<std::vector<int64_t>>& shapes) {
  std::vector<ops::DeviceView> v;
  for (const auto& s : shapes) {
    bufs.emplace_back(size_t(s[0] * s[1] * 2));
    v.push_back({bufs.back().ptr(), DType::bf16, s});
  }
  return v;
}

const ops::Config kSmallTiles{{"bm", 64}, {"bn", 64}, {"bk", 32}, {"stages", 2}, {"threads", 128}};

} // namespace

TEST(FakeDriverHostCaches, ACallWithOtherShapesIsRoutedAgain) {
  if (!on_fake_driver()) return; // the child ran it
  ops::DispatchOptions o;
  o.disable_libraries = {"cuBLASLt"}; // the fallback is the unfused reference kernel
  o.log = [](const std::string&) {};
  ops::Dispatcher d(o);
  const ops::Problem p = gemm_problem(64, 64, 64);
  d.pin("gemm", kH200, {{p, ops::default_config(p, "sm_90a")}});
  std::vector<rt::DeviceBuffer> bufs;
  auto pinned = views(bufs, {{64, 64}, {64, 64}, {64, 64}});
  auto other = views(bufs, {{128, 64}, {64, 64}, {128, 64}}); // M = 128: not pinned
  d.run("gemm", pinned);
  d.run("gemm", other);
  d.run("gemm", pinned);
  d.run("gemm", other);
  ops::OpCounters n = d.counters("gemm");
  EXPECT_EQ(n.pinned, 2);
  EXPECT_EQ(n.count(ops::FallbackReason::shape_outside_matrix), 2);
  // And a shape that is not a gemm at all is still refused after a good call.
  auto bad = views(bufs, {{64, 32}, {64, 64}, {64, 64}});
  d.run("gemm", pinned);
  EXPECT_THROW(d.run("gemm", bad), UserError);
}

TEST(FakeDriverHostCaches, ANewReleaseNamesItsOwnConfigInTheLaunchContext) {
  if (!on_fake_driver()) return;
  ops::Dispatcher d;
  const ops::Problem p = gemm_problem(64, 64, 64);
  std::vector<rt::DeviceBuffer> bufs;
  auto v = views(bufs, {{64, 64}, {64, 64}, {64, 64}});
  ops::Config wide = kSmallTiles;
  wide["bn"] = 128;
  for (const ops::Config& c : {kSmallTiles, wide, kSmallTiles}) {
    d.pin("gemm", kH200, {{p, c}});
    d.run("gemm", v);
    std::optional<rt::LaunchRecord> last = rt::last_launch();
    ASSERT_TRUE(last);
    EXPECT_EQ(last->kernel, "gemm_nn");
    EXPECT_EQ(last->context, "dispatched device|" + dispatch::bucket_key(p, c));
  }
  EXPECT_EQ(d.counters("gemm").pinned, 3);
}

TEST(FakeDriverHostCaches, ALaunchWithNewShapesIsBoundAndCheckedAgain) {
  if (!on_fake_driver()) return;
  cuda::CudaKernel ck(ops::gemm_kernel(DType::bf16, "nn", kSmallTiles), "sm_90a");
  std::vector<rt::DeviceBuffer> bufs;
  auto tensors = [&](int64_t m, int64_t n, int64_t k, int64_t kb) {
    std::vector<cuda::DeviceTensor> t;
    for (auto [r, c] : {std::pair{m, k}, std::pair{kb, n}, std::pair{m, n}}) {
      bufs.emplace_back(size_t(r * c * 2));
      t.emplace_back(bufs.back().ptr(), DType::bf16, std::vector<int64_t>{r, c});
    }
    return t;
  };
  auto small = tensors(64, 64, 64, 64), large = tensors(128, 192, 64, 64);
  auto grid = [] { return rt::last_launch()->grid; };
  using G = std::array<unsigned, 3>;
  ck.launch(small);
  EXPECT_EQ(grid(), (G{1, 1, 1}));
  ck.launch(large); // grid (ceil(N / bn), ceil(M / bm))
  EXPECT_EQ(grid(), (G{3, 2, 1}));
  try {
    ck.launch(tensors(64, 64, 64, 32)); // B's K is 32, A's is 64
    FAIL() << "no error for a K mismatch";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("Dim K is 64 from tensor 'A' but 32 from tensor 'B'"),
              std::string::npos)
        << e.what();
  }
  ck.launch(small);
  EXPECT_EQ(grid(), (G{1, 1, 1}));
  // A null pointer is checked on every launch, also when the shapes repeat.
  auto null_a = small;
  null_a[0].ptr = 0;
  EXPECT_THROW(ck.launch(null_a), UserError);
}

// What the torch op does (python/src/device_ops.cpp run_cuda): an attention call with its
// options, on problems pinned to the default config, twice (the second reuses the caches).
TEST(FakeDriverHostCaches, PinnedAttentionWithOptionsRunsTwice) {
  if (!on_fake_driver()) return;
  ops::DispatchOptions o;
  o.log = [](const std::string&) {};
  ops::Dispatcher d(o);
  const ops::Problem p = ops::find_operator("attention")
                             .parse({{"B", "2"},
                                     {"H", "16"},
                                     {"Hkv", "8"},
                                     {"S", "1024"},
                                     {"Skv", "1024"},
                                     {"D", "128"},
                                     {"causal", "1"}},
                                    DType::bf16);
  d.pin("attention", kH200, {{p, ops::default_config(p, "sm_90a")}});
  std::vector<rt::DeviceBuffer> bufs;
  std::vector<ops::DeviceView> v;
  for (std::vector<int64_t> s : {std::vector<int64_t>{2, 16, 1024, 128},
                                 {2, 8, 1024, 128},
                                 {2, 8, 1024, 128},
                                 {2, 16, 1024, 128}}) {
    bufs.emplace_back(size_t(s[0] * s[1] * s[2] * s[3] * 2));
    v.push_back({bufs.back().ptr(), DType::bf16, s});
  }
  d.run("attention", v, {{"causal", "1"}});
  d.run("attention", v, {{"causal", "1"}});
  EXPECT_EQ(d.counters("attention").pinned, 2);
}
