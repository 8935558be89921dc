// cuDNN's fused scaled-dot-product attention forward, loaded at run time: the attention speed
// baseline and fallback. Semantics are AttentionOp's (see ops/attention/AttentionOp.h and AttentionDesc):
// bf16/f16, [B, heads, seq, D] with arbitrary strides, causal bottom-right, grouped heads,
// per-batch key lengths, optional natural-log LSE, any scale. The graph is described in
// CudnnSdpaGraph.h. Which combinations run depends on the loaded cuDNN; supports() says, in
// words, why one does not, so the caller can fall back to the unfused reference and say so.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "ops/reference/AttentionDesc.h"
#include "ops/vendor/VendorLibrary.h"
#include "runtime/DeviceBuffer.h"

namespace tp::ops {

/// The cuDNN library this process would load now: $TILEPILOT_CUDNN_PATH when set, else
/// libcudnn.so.9. Needs no GPU. nullopt and what was tried when it is missing.
std::optional<VendorLibrary> cudnn_library(std::string* why_not = nullptr);

/// Whether cuDNN attention can run here: cuDNN 9 loads, and a handle can be created (which needs
/// a driver and a GPU). The first successful check keeps its handle for CudnnAttention.
bool cudnn_attention_available(std::string* why_not = nullptr);

/// For CPU tests: builds and finalizes every node of the graph for `d` with the loaded cuDNN (no
/// GPU needed) and returns the number of operations. UserError naming the node cuDNN rejected.
int cudnn_attention_graph_check(const AttentionDesc& d);

/// A cuDNN handle and a cache of finalized execution plans, one per distinct AttentionDesc.
/// Not thread-safe: use one object per thread.
class CudnnAttention {
public:
  /// User error saying what is missing when cudnn_attention_available() is false.
  CudnnAttention();
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  /// Whether the loaded cuDNN runs `d`: known version limits first, then building the graph and
  /// asking cuDNN's heuristics for an engine that finalizes. The answer (and a successful plan) is
  /// cached. `why_not` names the feature combination, the cuDNN version and cuDNN's message.
  bool supports(const AttentionDesc& d, std::string* why_not = nullptr);

  /// Runs attention on `stream`. User error when `d` is malformed, a pointer is null or not
  /// 16-byte aligned, or supports(d) is false (with its reason).
  void run(const AttentionDesc& d, const AttentionPtrs& p, CUstream stream = nullptr);

  /// "engine 8 (3 candidates), workspace 0 B" for the plan of `d`; "" when unsupported.
  std::string plan_summary(const AttentionDesc& d);

  const VendorLibrary& library() const { return library_; }

  struct Plan;

private:
  Plan* plan(const AttentionDesc& d, std::string* why_not);

  VendorLibrary library_;
  void* handle_ = nullptr; // cudnnHandle_t, shared with cudnn_attention_available()
  rt::DeviceBuffer workspace_;
  std::map<std::string, std::unique_ptr<Plan>> plans_; // by AttentionDesc::key()
  std::map<std::string, std::string> unsupported_;     // key -> reason
};

} // namespace tp::ops
