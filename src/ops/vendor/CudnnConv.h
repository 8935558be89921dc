// cuDNN's 2-D forward convolution through its backend (graph) API, loaded at run time: the
// reference lesson 12's implicit-GEMM conv is timed against (bench/bench_conv.cpp). One layout
// only, the lesson's: X NHWC [N, H, W, C], filter KRSC [F, KH, KW, C], Y NHWC [N, OH, OW, F];
// bf16 in and out, f32 accumulation, cross-correlation (the filter is not flipped), dilation 1,
// the same padding before and after. The graph is one convolution-forward node; an engine is
// picked by cuDNN's heuristics (mode A, then the fallback list), the first config that finalizes.
#pragma once
#include <memory>
#include <string>

#include "ops/vendor/VendorLibrary.h"
#include "runtime/DeviceBuffer.h"

namespace tp::ops {

struct ConvFwdShape {
  int64_t N = 0, H = 0, W = 0, C = 0; // X [N, H, W, C]
  int64_t F = 0, KH = 0, KW = 0;      // filter [F, KH, KW, filter_C]
  int64_t filter_C = 0;               // must equal C: grouped convolution is not supported
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0; // zeros added on both sides of the image

  int64_t OH() const { return (H + 2 * pad_h - KH) / stride_h + 1; }
  int64_t OW() const { return (W + 2 * pad_w - KW) / stride_w + 1; }
  /// 2 P F KH KW C with P = N OH OW output pixels.
  double flops() const { return 2.0 * double(N * OH() * OW()) * double(F * KH * KW * C); }
  /// "conv bf16 X 128x64x64x128 W 128x3x3x128 stride 1x1 pad 1x1 -> Y 128x64x64x128".
  std::string str() const;
};

/// UserError naming the field and the rule it breaks: a size that is not positive, filter_C != C,
/// a stride below 1, a negative padding, or a window larger than the padded image.
void validate_conv_fwd_shape(const ConvFwdShape& s);

/// For CPU tests: validates `s`, then builds and finalizes the X, W, Y tensor descriptors, the
/// convolution descriptor and the forward operation with the loaded cuDNN (no GPU needed).
/// UserError naming the descriptor cuDNN rejected.
void cudnn_conv_fwd_graph_check(const ConvFwdShape& s);

/// Whether cuDNN convolution can run here: cuDNN 9 loads and a handle can be created (which
/// needs a driver and a GPU).
bool cudnn_conv_available(std::string* why_not = nullptr);

/// One problem's finalized execution plan, its workspace and a cached variant pack.
/// Not thread-safe: use one object per thread.
class CudnnConvFwd {
public:
  /// Builds the plan for `s`. UserError when cuDNN cannot run here, `s` is malformed, or no
  /// engine accepts it (with cuDNN's reasons).
  explicit CudnnConvFwd(const ConvFwdShape& s);
  ~CudnnConvFwd();
  CudnnConvFwd(const CudnnConvFwd&) = delete;
  CudnnConvFwd& operator=(const CudnnConvFwd&) = delete;

  /// Y = conv(X, W) on `stream`. Pointers are device addresses, 16-byte aligned.
  void run(CUdeviceptr x, CUdeviceptr w, CUdeviceptr y, CUstream stream = nullptr);

  const ConvFwdShape& shape() const { return shape_; }
  /// "engine 12 (heuristics A, candidate 0), workspace 0 B".
  const std::string& plan_summary() const;
  const VendorLibrary& library() const { return library_; }

  struct Plan;

private:
  ConvFwdShape shape_;
  VendorLibrary library_;
  std::unique_ptr<Plan> plan_;
  rt::DeviceBuffer workspace_;
};

} // namespace tp::ops
