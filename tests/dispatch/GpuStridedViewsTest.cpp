// Attention on strided Q, K, V and O views on the GPU (label gpu): [B, S, H, D] buffers viewed
// as [B, H, S, D], as a PyTorch model's projections reach attention, read and written in place
// by the pinned kernel (TMA when the row pitch is a 16-byte multiple, the plain variant
// otherwise), by cuDNN and by the unfused reference. Each output is checked against the fp64
// reference of the contiguous inputs; the pinned kernel's TMA run also against its own contiguous
// run, bit for bit.
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>

#include "DispatchTestSupport.h"
#include "dispatch/DeviceRun.h"
#include "dispatch/DispatcherImpl.h"
#include "runtime/DeviceBuffer.h"
#include "runtime/Driver.h"

using namespace tp;
using namespace tp::ops;
using test::heads_view;
using test::problem;

namespace {

/// The call's four tensors on the device: as heads views with K's rows padded by `k_pad`
/// elements and O's by 8 (or contiguous, `views` false); O starts as NaN.
struct Call {
  std::vector<rt::DeviceBuffer> bufs;
  std::vector<DeviceView> views;
  HostTensor o_base; // O's buffer as the host sees it (a heads view's base, or O itself)
  Call(const std::vector<HostTensor>& args, bool as_views, int64_t k_pad) {
    for (int i = 0; i < 4; ++i) {
      HostTensor base;
      const HostTensor* src = &args[i];
      std::vector<int64_t> strides;
      if (as_views) {
        HostView v = heads_view(args[i], base, i == 1 ? k_pad : i == 3 ? 8 : 0);
        src = &base;
        strides = v.strides;
      }
      bufs.emplace_back(src->bytes());
      if (i == 3)
        o_base = *src;
      else
        bufs.back().upload(src->data(), src->bytes());
      views.push_back({bufs.back().ptr(), args[i].dtype(), args[i].shape(), strides});
    }
  }
  void run(Dispatcher& d, bool causal) {
    bufs[3].memset(0xff);
    d.attention(views[0], views[1], views[2], views[3], causal);
  }
  /// O gathered into a contiguous [B, H, S, D] tensor.
  HostTensor out() {
    TILEPILOT_CU(rt::driver().cuCtxSynchronize());
    bufs[3].download(o_base.data(), o_base.bytes());
    const DeviceView& o = views[3];
    if (o.strides.empty()) return o_base;
    HostTensor h(o.dtype, o.shape);
    int64_t i = 0;
    for (int64_t b = 0; b < o.shape[0]; ++b)
      for (int64_t hh = 0; hh < o.shape[1]; ++hh)
        for (int64_t s = 0; s < o.shape[2]; ++s)
          for (int64_t d = 0; d < o.shape[3]; ++d)
            h.set(i++, o_base.get(b * o.strides[0] + hh * o.strides[1] + s * o.strides[2] +
                                  d * o.strides[3]));
    return h;
  }
  /// Whether O's row padding (a view's elements past D) still holds the NaN of run().
  bool padding_untouched() const {
    const int64_t pitch = views[3].strides.at(2) / views[3].shape[1], D = views[3].shape[3];
    for (int64_t r = 0; r < o_base.numel() / pitch; ++r)
      for (int64_t d = D; d < pitch; ++d)
        if (!std::isnan(o_base.get(r * pitch + d))) return false;
    return true;
  }
};

/// Elements of `got` outside the reference's tolerance (NaN counts), over every (b, h).
int64_t wrong(const Problem& p, const std::vector<HostTensor>& args, const HostTensor& got) {
  const Operator& op = find_operator("attention");
  auto [atol, rtol] = op.tolerance(p.dtype);
  int64_t bad = 0;
  for (int64_t b = 0; b < p.at("B"); ++b)
    for (int64_t h = 0; h < p.at("H"); ++h) {
      std::vector<double> ref =
          op.reference(p, args, Box{3, {b, h, 0, 0}, {1, 1, p.at("S"), p.at("D")}});
      const int64_t base = (b * p.at("H") + h) * p.at("S") * p.at("D");
      for (size_t i = 0; i < ref.size(); ++i) {
        double g = got.get(base + static_cast<int64_t>(i));
        bad += !(std::fabs(g - ref[i]) <= atol + rtol * std::fabs(ref[i]));
      }
    }
  return bad;
}

} // namespace

TEST(GpuStridedViews, AttentionReadsAndWritesHeadViewsInPlaceOnEveryPath) {
  for (const char* shape :
       {"B=2,H=8,Hkv=2,S=200,Skv=200,D=128,causal=1", "B=1,H=4,Hkv=4,S=77,Skv=300,D=64,causal=0"}) {
    SCOPED_TRACE(shape);
    Problem p = problem("attention", shape);
    const bool causal = p.at("causal") != 0;
    auto args = find_operator("attention").make_args(p, 5);
    std::vector<std::string> log;
    Dispatcher d(test::capture_log(&log));
    DeviceIdentity dev = dispatch::current_device();
    dispatch::install_release(
        d, dispatch::memory_release("attention", dev,
                                    {{p, find_operator("attention").default_config(p, dev.arch)}}));
    Call dense(args, false, 0), tma(args, true, 8), plain(args, true, 4);
    dense.run(d, causal);
    tma.run(d, causal);   // pitch D + 8: 16-byte multiple rows, the TMA variant
    plain.run(d, causal); // pitch D + 4: 8-byte rows, the plain variant
    HostTensor want = dense.out(), got = tma.out();
    EXPECT_EQ(wrong(p, args, want), 0);
    EXPECT_EQ(std::memcmp(want.data(), got.data(), want.bytes()), 0) << "TMA on views";
    EXPECT_EQ(wrong(p, args, plain.out()), 0) << "plain variant on views";
    EXPECT_TRUE(tma.padding_untouched() && plain.padding_untouched());
    EXPECT_EQ(d.counters("attention").pinned, 3);
    d.force_fallback("attention", true);
    tma.run(d, causal);
    EXPECT_EQ(wrong(p, args, tma.out()), 0) << "cuDNN on views";
    EXPECT_TRUE(tma.padding_untouched()) << "cuDNN";
    DispatchOptions o = test::capture_log(&log);
    o.disable_libraries = {"cuDNN"};
    Dispatcher unfused(o);
    plain.run(unfused, causal);
    EXPECT_EQ(wrong(p, args, plain.out()), 0) << "unfused reference on views";
    EXPECT_TRUE(plain.padding_untouched()) << "unfused reference";
    EXPECT_EQ(unfused.counters("attention").fallback_impl["unfused fp32 GPU reference"], 1);
  }
}
