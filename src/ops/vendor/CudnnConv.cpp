// CudnnConvFwd: the convolution-forward node (tensors in cuDNN's N, C, spatial dimension order,
// described with NHWC / KRSC strides), its plan (CudnnBackend.h: heuristics -> first engine
// config that finalizes) on the process's cuDNN handle, and execution with a cached variant pack.
#include "ops/vendor/CudnnConv.h"

#include <fmt/format.h>
#include <vector>

#include "ops/vendor/CudnnBackend.h"
#include "runtime/Driver.h"
#include "tilepilot/error.h"
#include "tilepilot/runtime.h"

namespace tp::ops {

using cudnn::Desc;

namespace {

constexpr const char* kWho = "cuDNN conv";

// Unique ids of the three tensors; the variant pack binds pointers to them.
enum ConvUid : int64_t { kUidX = 1, kUidW, kUidY };

struct ConvGraph {
  Desc x, w, y, conv, op; // op refers to the others: they live as long as it does
};

/// A bf16 tensor whose dims are in cuDNN's order (N, C, H, W) and whose strides say where each
/// lies in channels-last memory: the channel is the innermost dimension.
Desc channels_last_tensor(int64_t uid, const char* name, int64_t n, int64_t c, int64_t h,
                          int64_t w) {
  Desc d(CUDNN_BACKEND_TENSOR_DESCRIPTOR, fmt::format("tensor '{}' (uid {})", name, uid));
  d.set_data_type(TILEPILOT_ATTR(CUDNN_ATTR_TENSOR_DATA_TYPE), CUDNN_DATA_BFLOAT16)
      .set_int64s(TILEPILOT_ATTR(CUDNN_ATTR_TENSOR_DIMENSIONS), {n, c, h, w})
      .set_int64s(TILEPILOT_ATTR(CUDNN_ATTR_TENSOR_STRIDES), {h * w * c, 1, w * c, c})
      .set_int64(TILEPILOT_ATTR(CUDNN_ATTR_TENSOR_UNIQUE_ID), uid)
      .set_int64(TILEPILOT_ATTR(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT), 16)
      .finalize();
  return d;
}

ConvGraph build_graph(const ConvFwdShape& s) {
  ConvGraph g;
  g.x = channels_last_tensor(kUidX, "X", s.N, s.C, s.H, s.W);
  g.w = channels_last_tensor(kUidW, "W", s.F, s.C, s.KH, s.KW); // KRSC is "NHWC" with F as N
  g.y = channels_last_tensor(kUidY, "Y", s.N, s.F, s.OH(), s.OW());

  g.conv = Desc(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, "convolution descriptor");
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION; // what deep learning calls conv
  const std::vector<int64_t> pad = {s.pad_h, s.pad_w};
  g.conv.set_data_type(TILEPILOT_ATTR(CUDNN_ATTR_CONVOLUTION_COMP_TYPE), CUDNN_DATA_FLOAT)
      .set(TILEPILOT_ATTR(CUDNN_ATTR_CONVOLUTION_CONV_MODE), CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode)
      .set_int64(TILEPILOT_ATTR(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS), 2)
      .set_int64s(TILEPILOT_ATTR(CUDNN_ATTR_CONVOLUTION_DILATIONS), {1, 1})
      .set_int64s(TILEPILOT_ATTR(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES), {s.stride_h, s.stride_w})
      .set_int64s(TILEPILOT_ATTR(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS), pad)
      .set_int64s(TILEPILOT_ATTR(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS), pad)
      .finalize();

  // Y = alpha conv(X, W) + beta Y; the scalars are f32 because the compute type is.
  const float alpha = 1, beta = 0;
  g.op = Desc(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, "convolution forward");
  g.op.set_desc(TILEPILOT_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X), g.x)
      .set_desc(TILEPILOT_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W), g.w)
      .set_desc(TILEPILOT_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y), g.y)
      .set_desc(TILEPILOT_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC), g.conv)
      .set(TILEPILOT_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA), CUDNN_TYPE_FLOAT, 1,
           &alpha)
      .set(TILEPILOT_ATTR(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA), CUDNN_TYPE_FLOAT, 1,
           &beta)
      .finalize();
  return g;
}

bool aligned16(CUdeviceptr p) {
  return p % 16 == 0;
}

} // namespace

std::string ConvFwdShape::str() const {
  return fmt::format(
      "conv bf16 X {}x{}x{}x{} W {}x{}x{}x{} stride {}x{} pad {}x{} -> Y {}x{}x{}x{}", N, H, W, C,
      F, KH, KW, filter_C, stride_h, stride_w, pad_h, pad_w, N, OH(), OW(), F);
}

void validate_conv_fwd_shape(const ConvFwdShape& s) {
  const std::pair<const char*, int64_t> sizes[] = {
      {"N", s.N}, {"H", s.H},   {"W", s.W},   {"C", s.C},
      {"F", s.F}, {"KH", s.KH}, {"KW", s.KW}, {"filter_C", s.filter_C}};
  for (const auto& [name, v] : sizes)
    if (v <= 0) user_error() << kWho << ": " << name << "=" << v << " must be positive";
  if (s.filter_C != s.C)
    user_error() << kWho << ": the filter has " << s.filter_C
                 << " input channels but X has C=" << s.C
                 << "; they must match (grouped convolution is not supported)";
  const std::pair<const char*, int64_t> strides[] = {{"stride_h", s.stride_h},
                                                     {"stride_w", s.stride_w}};
  for (const auto& [name, v] : strides)
    if (v < 1) user_error() << kWho << ": " << name << "=" << v << " must be at least 1";
  const std::pair<const char*, int64_t> pads[] = {{"pad_h", s.pad_h}, {"pad_w", s.pad_w}};
  for (const auto& [name, v] : pads)
    if (v < 0) user_error() << kWho << ": " << name << "=" << v << " must not be negative";
  if (s.KH > s.H + 2 * s.pad_h || s.KW > s.W + 2 * s.pad_w)
    user_error() << kWho << ": the " << s.KH << "x" << s.KW << " filter window is larger than the "
                 << s.H + 2 * s.pad_h << "x" << s.W + 2 * s.pad_w
                 << " padded image, so the output would be empty";
}

void cudnn_conv_fwd_graph_check(const ConvFwdShape& s) {
  validate_conv_fwd_shape(s);
  std::string why;
  if (!cudnn::api(&why)) user_error() << kWho << ": " << why;
  build_graph(s);
}

bool cudnn_conv_available(std::string* why_not) {
  return cudnn::process_handle(why_not) != nullptr;
}

struct CudnnConvFwd::Plan {
  ConvGraph graph;
  Desc op_graph, engine_cfg, plan;
  int64_t workspace = 0;
  std::string summary;
  // The last variant pack and the pointers it binds; rebuilt when any of them changes.
  Desc pack;
  std::vector<void*> pack_ptrs;
};

CudnnConvFwd::CudnnConvFwd(const ConvFwdShape& s) : shape_(s), plan_(std::make_unique<Plan>()) {
  validate_conv_fwd_shape(s);
  std::string why;
  if (!cudnn_conv_available(&why)) user_error() << kWho << " cannot run: " << why;
  const cudnn::Api& a = *cudnn::api();
  library_ = a.library;
  cudnnHandle_t handle = cudnn::process_handle();
  Plan& p = *plan_;
  p.graph = build_graph(s);
  cudnnBackendDescriptor_t op = p.graph.op.get();
  p.op_graph = Desc(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "convolution operation graph");
  p.op_graph.set(TILEPILOT_ATTR(CUDNN_ATTR_OPERATIONGRAPH_HANDLE), CUDNN_TYPE_HANDLE, 1, &handle)
      .set(TILEPILOT_ATTR(CUDNN_ATTR_OPERATIONGRAPH_OPS), CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op)
      .finalize();

  std::vector<std::string> failures; // cuDNN's reasons, one per refused heuristic or config
  std::optional<cudnn::EnginePlan> ep = cudnn::first_engine_plan(p.op_graph, handle, failures);
  if (!ep)
    user_error() << library_.describe() << " does not run " << s.str()
                 << ": no cuDNN engine accepts this graph (" << cudnn::failure_summary(failures)
                 << ")";
  p.workspace = ep->workspace;
  p.summary = fmt::format("{}, workspace {}", ep->engine, rt::format_bytes(uint64_t(p.workspace)));
  p.engine_cfg = std::move(ep->engine_cfg);
  p.plan = std::move(ep->plan);
  if (p.workspace > 0) workspace_ = rt::DeviceBuffer(static_cast<size_t>(p.workspace));
}

CudnnConvFwd::~CudnnConvFwd() = default;

const std::string& CudnnConvFwd::plan_summary() const {
  return plan_->summary;
}

void CudnnConvFwd::run(CUdeviceptr x, CUdeviceptr w, CUdeviceptr y, CUstream stream) {
  const std::pair<const char*, CUdeviceptr> ptrs[] = {{"X", x}, {"W", w}, {"Y", y}};
  for (const auto& [name, ptr] : ptrs) {
    if (!ptr) user_error() << kWho << ": the " << name << " pointer is null";
    if (!aligned16(ptr))
      user_error() << kWho << ": " << name << " pointer 0x" << std::hex << ptr
                   << " is not 16-byte aligned, which the tensor descriptors promise cuDNN";
  }
  Plan& p = *plan_;
  std::vector<void*> data = {reinterpret_cast<void*>(x), reinterpret_cast<void*>(w),
                             reinterpret_cast<void*>(y)};
  void* ws = p.workspace > 0 ? reinterpret_cast<void*>(workspace_.ptr()) : nullptr;
  std::vector<void*> key = data;
  key.push_back(ws);
  if (!p.pack.get() || p.pack_ptrs != key) {
    Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack of " + shape_.str());
    pack.set_int64s(TILEPILOT_ATTR(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS), {kUidX, kUidW, kUidY})
        .set(TILEPILOT_ATTR(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS), CUDNN_TYPE_VOID_PTR,
             static_cast<int64_t>(data.size()), data.data())
        .set(TILEPILOT_ATTR(CUDNN_ATTR_VARIANT_PACK_WORKSPACE), CUDNN_TYPE_VOID_PTR, 1, &ws)
        .finalize();
    p.pack = std::move(pack);
    p.pack_ptrs = std::move(key);
  }
  const cudnn::Api& a = *cudnn::api();
  cudnnHandle_t handle = cudnn::process_handle();
  if (cudnnStatus_t s = a.cudnnSetStream(handle, stream); s != CUDNN_STATUS_SUCCESS)
    user_error() << kWho << ": cudnnSetStream failed with " << cudnn::status_text(s);
  if (cudnnStatus_t s = a.cudnnBackendExecute(handle, p.plan.get(), p.pack.get());
      s != CUDNN_STATUS_SUCCESS)
    user_error() << kWho << ": cudnnBackendExecute failed with " << cudnn::status_text(s) << " for "
                 << shape_.str() << " (" << p.summary << ", " << library_.describe() << ")";
}

} // namespace tp::ops
