// cuDNN loaded with dlopen, and a thin owning wrapper over its backend (graph) API descriptors.
// cudnn_graph.h is used for types and enums only. Building and finalizing tensor and operation
// descriptors needs no GPU; operation graphs, plans and execution need a handle (and a GPU).
#pragma once
#include <cstdint>
#include <cudnn_graph.h>
#include <optional>
#include <string>
#include <vector>

#include "ops/vendor/VendorLibrary.h"

namespace tp::ops::cudnn {

#define TILEPILOT_CUDNN_FUNCS(X)                                                                   \
  X(cudnnGetVersion)                                                                               \
  X(cudnnGetErrorString)                                                                           \
  X(cudnnCreate)                                                                                   \
  X(cudnnDestroy)                                                                                  \
  X(cudnnSetStream)                                                                                \
  X(cudnnBackendCreateDescriptor)                                                                  \
  X(cudnnBackendDestroyDescriptor)                                                                 \
  X(cudnnBackendSetAttribute)                                                                      \
  X(cudnnBackendGetAttribute)                                                                      \
  X(cudnnBackendFinalize)                                                                          \
  X(cudnnBackendExecute)

struct Api {
#define TILEPILOT_X(n) decltype(&::n) n = nullptr;
  TILEPILOT_CUDNN_FUNCS(TILEPILOT_X)
#undef TILEPILOT_X
  decltype(&::cudnnGetLastErrorString) cudnnGetLastErrorString = nullptr; // 9.0+; may be null
  VendorLibrary library;
};

/// Opens cuDNN now: the file named by $TILEPILOT_CUDNN_PATH when set, else libcudnn.so.9 (bare
/// name, $CUDA_HOME/lib64, /usr/local/cuda/lib64). nullopt and what was tried when it fails.
std::optional<Api> load_api(std::string* why_not);

/// The process-wide table: load_api() once, at first use.
const Api* api(std::string* why_not = nullptr);

/// "CUDNN_STATUS_NOT_SUPPORTED: <cuDNN's last error message, when it left one>".
std::string status_text(cudnnStatus_t s);

/// One backend descriptor, destroyed with the object. Every setter and finalize() throws a
/// UserError naming this descriptor (`what`), the attribute and cuDNN's status and message.
class Desc {
public:
  Desc() = default;
  Desc(cudnnBackendDescriptorType_t type, std::string what);
  ~Desc();
  Desc(Desc&& o) noexcept : d_(o.d_), what_(std::move(o.what_)) { o.d_ = nullptr; }
  Desc& operator=(Desc&& o) noexcept;
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;

  cudnnBackendDescriptor_t get() const { return d_; }
  const std::string& what() const { return what_; }

  Desc& set(cudnnBackendAttributeName_t attr, const char* attr_name,
            cudnnBackendAttributeType_t type, int64_t count, const void* values);
  Desc& set_int64(cudnnBackendAttributeName_t attr, const char* name, int64_t v);
  Desc& set_int64s(cudnnBackendAttributeName_t attr, const char* name,
                   const std::vector<int64_t>& v);
  Desc& set_data_type(cudnnBackendAttributeName_t attr, const char* name, cudnnDataType_t t);
  Desc& set_bool(cudnnBackendAttributeName_t attr, const char* name, bool v);
  Desc& set_desc(cudnnBackendAttributeName_t attr, const char* name, const Desc& v);
  Desc& finalize();

private:
  cudnnBackendDescriptor_t d_ = nullptr;
  std::string what_;
};

/// Stringizes the attribute for messages: TILEPILOT_ATTR(CUDNN_ATTR_TENSOR_UNIQUE_ID).
#define TILEPILOT_ATTR(a) a, #a

/// The process's one cuDNN handle, created at first use in the primary context of the selected
/// device, shared by every cuDNN path (attention, convolution). Null, with why_not, when cuDNN 9
/// does not load, there is no usable GPU or cudnnCreate fails. Never destroyed: plans made
/// from it may live until exit.
cudnnHandle_t process_handle(std::string* why_not = nullptr);

/// A finalized execution plan for an operation graph and the engine config it was made from.
struct EnginePlan {
  Desc engine_cfg, plan;
  int64_t workspace = 0; // bytes
  /// "engine 62 (heuristics A, candidate 0)".
  std::string engine;
};

/// The first engine config, proposed by heuristics mode A and then by the fallback list, whose
/// plan finalizes on `handle`. nullopt when none does; `failures` gets cuDNN's reason for each
/// refused heuristic or config either way.
std::optional<EnginePlan> first_engine_plan(const Desc& op_graph, cudnnHandle_t handle,
                                            std::vector<std::string>& failures);

/// The first four of `failures`, "; "-joined, and how many more: for a refusal's message.
std::string failure_summary(const std::vector<std::string>& failures);

} // namespace tp::ops::cudnn
