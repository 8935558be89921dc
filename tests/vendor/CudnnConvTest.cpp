// CPU checks of the cuDNN convolution-forward node: for NHWC / KRSC shapes like lesson 12's, the
// tensor, convolution and operation descriptors finalize with the cuDNN found here (cuDNN checks
// that Y's dims follow from X, W, stride and padding); malformed shapes are UserErrors that name
// the field and the rule, before cuDNN is asked; without a GPU the plan says why it cannot run.
#include <gtest/gtest.h>

#include "ops/vendor/CudnnAttention.h"
#include "ops/vendor/CudnnConv.h"
#include "tilepilot/error.h"
#include "tilepilot/runtime.h"

using namespace tp;
using namespace tp::ops;

namespace {

ConvFwdShape shape(int64_t N, int64_t H, int64_t W, int64_t C, int64_t F, int64_t K, int64_t stride,
                   int64_t pad) {
  ConvFwdShape s;
  s.N = N, s.H = H, s.W = W, s.C = C, s.filter_C = C;
  s.F = F, s.KH = K, s.KW = K;
  s.stride_h = s.stride_w = stride;
  s.pad_h = s.pad_w = pad;
  return s;
}

/// Runs `f`, expects a UserError, and returns its message.
template <typename F>
std::string user_error_of(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a UserError";
  return "";
}

} // namespace

TEST(CudnnConv, NhwcShapesFinalize) {
  if (!cudnn_library()) GTEST_SKIP() << "no cuDNN here";
  struct Case {
    const char* what;
    ConvFwdShape s;
  };
  ConvFwdShape rect = shape(1, 7, 12, 16, 8, 3, 1, 0);
  rect.KW = 5, rect.stride_w = 2, rect.pad_w = 2;
  const Case cases[] = {
      {"lesson 12 CPU box shape", shape(2, 8, 8, 32, 24, 3, 1, 1)},
      {"lesson 12 GPU shape", shape(128, 64, 64, 128, 128, 3, 1, 1)},
      {"stride 2", shape(2, 9, 11, 8, 16, 3, 2, 1)},
      {"1x1, no padding", shape(4, 14, 14, 64, 32, 1, 1, 0)},
      {"3x5 window, different strides and pads per axis", rect},
  };
  for (const Case& c : cases) {
    try {
      cudnn_conv_fwd_graph_check(c.s);
    } catch (const Error& e) {
      ADD_FAILURE() << c.what << " (" << c.s.str() << "): " << e.what();
    }
  }
}

TEST(CudnnConv, OutputSizeAndFlopsFollowTheShape) {
  ConvFwdShape s = shape(128, 64, 64, 128, 128, 3, 1, 1);
  EXPECT_EQ(s.OH(), 64);
  EXPECT_EQ(s.OW(), 64);
  EXPECT_DOUBLE_EQ(s.flops(), 2.0 * 128 * 64 * 64 * 128 * 3 * 3 * 128);
  EXPECT_EQ(s.str(),
            "conv bf16 X 128x64x64x128 W 128x3x3x128 stride 1x1 pad 1x1 -> Y 128x64x64x128");
  ConvFwdShape t = shape(2, 9, 11, 8, 13, 3, 2, 1);
  EXPECT_EQ(t.OH(), 5);
  EXPECT_EQ(t.OW(), 6);
}

TEST(CudnnConv, MalformedShapesAreUserErrorsNamingTheRule) {
  // Validation comes before cuDNN is loaded, so these hold with or without it.
  ConvFwdShape s = shape(2, 8, 8, 32, 24, 3, 1, 1);
  s.filter_C = 16;
  std::string msg = user_error_of([&] { cudnn_conv_fwd_graph_check(s); });
  EXPECT_NE(msg.find("cuDNN conv: the filter has 16 input channels but X has C=32"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("grouped convolution is not supported"), std::string::npos) << msg;

  s = shape(2, 8, 8, 32, 24, 3, 0, 1);
  msg = user_error_of([&] { cudnn_conv_fwd_graph_check(s); });
  EXPECT_NE(msg.find("stride_h=0 must be at least 1"), std::string::npos) << msg;
  s = shape(2, 8, 8, 32, 24, 3, 1, 1);
  s.stride_w = -2;
  msg = user_error_of([&] { cudnn_conv_fwd_graph_check(s); });
  EXPECT_NE(msg.find("stride_w=-2 must be at least 1"), std::string::npos) << msg;

  s = shape(2, 8, 8, 32, 24, 3, 1, -1);
  msg = user_error_of([&] { cudnn_conv_fwd_graph_check(s); });
  EXPECT_NE(msg.find("pad_h=-1 must not be negative"), std::string::npos) << msg;

  s = shape(2, 8, 8, 0, 24, 3, 1, 1);
  msg = user_error_of([&] { cudnn_conv_fwd_graph_check(s); });
  EXPECT_NE(msg.find("C=0 must be positive"), std::string::npos) << msg;

  s = shape(2, 2, 2, 8, 8, 5, 1, 0);
  msg = user_error_of([&] { cudnn_conv_fwd_graph_check(s); });
  EXPECT_NE(msg.find("the 5x5 filter window is larger than the 2x2 padded image"),
            std::string::npos)
      << msg;
}

TEST(CudnnConv, WithoutADriverThePlanSaysWhy) {
  if (rt::driver_available()) GTEST_SKIP() << "a CUDA driver is present here";
  std::string why;
  EXPECT_FALSE(cudnn_conv_available(&why));
  // Without cuDNN the reason is the loader's instead (CudnnConv.NhwcShapesFinalize skips).
  if (cudnn_library()) EXPECT_NE(why.find("no usable GPU"), std::string::npos) << why;
  std::string msg = user_error_of([] { CudnnConvFwd c(shape(2, 8, 8, 32, 24, 3, 1, 1)); });
  EXPECT_NE(msg.find("cuDNN conv cannot run"), std::string::npos) << msg;
}
