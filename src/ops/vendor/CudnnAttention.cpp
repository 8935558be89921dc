// CudnnAttention: per-problem execution plans (graph -> heuristics -> first engine config that
// finalizes, CudnnBackend.h) on the process's cuDNN handle, and execution with a cached
// variant pack.
#include "ops/vendor/CudnnAttention.h"

#include <array>
#include <fmt/format.h>
#include <vector>

#include "ops/vendor/CudnnSdpaGraph.h"
#include "runtime/Driver.h"
#include "tilepilot/error.h"
#include "tilepilot/runtime.h"

namespace tp::ops {

using cudnn::Desc;

namespace {

constexpr const char* kWho = "cuDNN attention";

bool aligned16(CUdeviceptr p) {
  return p % 16 == 0;
}

} // namespace

struct CudnnAttention::Plan {
  std::unique_ptr<cudnn::SdpaGraph> graph;
  Desc op_graph, engine_cfg, plan;
  int64_t workspace = 0;
  std::string summary;
  rt::DeviceBuffer seq_q, seq_kv; // per-batch lengths owned by the plan (padded graphs)
  // The last variant pack and the pointers it binds; rebuilt when any of them changes.
  Desc pack;
  std::vector<void*> pack_ptrs;
};

std::optional<VendorLibrary> cudnn_library(std::string* why_not) {
  auto a = cudnn::load_api(why_not);
  if (!a) return std::nullopt;
  return a->library;
}

bool cudnn_attention_available(std::string* why_not) {
  return cudnn::process_handle(why_not) != nullptr;
}

int cudnn_attention_graph_check(const AttentionDesc& d) {
  validate_attention_desc(d, kWho);
  std::string why;
  const cudnn::Api* a = cudnn::api(&why);
  if (!a) user_error() << kWho << ": " << why;
  return static_cast<int>(cudnn::build_sdpa_graph(d, a->library.version)->ops.size());
}

CudnnAttention::CudnnAttention() {
  std::string why;
  if (!cudnn_attention_available(&why)) user_error() << kWho << " cannot run: " << why;
  library_ = cudnn::api()->library;
  handle_ = cudnn::process_handle();
}

CudnnAttention::~CudnnAttention() = default;

CudnnAttention::Plan* CudnnAttention::plan(const AttentionDesc& d, std::string* why_not) {
  validate_attention_desc(d, kWho);
  const std::string key = d.key();
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();
  auto refuse = [&](const std::string& reason) -> Plan* {
    std::string text = fmt::format("{} does not run {}: {}", library_.describe(), d.str(), reason);
    unsupported_[key] = text;
    if (why_not) *why_not = text;
    return nullptr;
  };
  if (auto it = unsupported_.find(key); it != unsupported_.end()) {
    if (why_not) *why_not = it->second;
    return nullptr;
  }
  if (std::string limit = cudnn::sdpa_known_limits(d, library_.version); !limit.empty())
    return refuse(limit);

  auto handle = static_cast<cudnnHandle_t>(handle_);
  auto p = std::make_unique<Plan>();
  std::vector<std::string> failures; // cuDNN's reasons, one per refused engine config
  try {
    p->graph = cudnn::build_sdpa_graph(d, library_.version);
    std::vector<cudnnBackendDescriptor_t> ops;
    for (const auto& op : p->graph->ops)
      ops.push_back(op->get());
    p->op_graph = Desc(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "SDPA operation graph");
    p->op_graph.set(TILEPILOT_ATTR(CUDNN_ATTR_OPERATIONGRAPH_HANDLE), CUDNN_TYPE_HANDLE, 1, &handle)
        .set(TILEPILOT_ATTR(CUDNN_ATTR_OPERATIONGRAPH_OPS), CUDNN_TYPE_BACKEND_DESCRIPTOR,
             static_cast<int64_t>(ops.size()), ops.data())
        .finalize();
    std::optional<cudnn::EnginePlan> ep = cudnn::first_engine_plan(p->op_graph, handle, failures);
    if (ep) {
      p->workspace = ep->workspace;
      p->summary = fmt::format("{}, workspace {} B, {} graph", ep->engine, p->workspace,
                               p->graph->padded ? "padded" : "dense");
      p->engine_cfg = std::move(ep->engine_cfg);
      p->plan = std::move(ep->plan);
    }
  } catch (const UserError& e) {
    return refuse(e.what());
  }
  if (!p->plan.get())
    return refuse("no cuDNN engine accepts this graph (" + cudnn::failure_summary(failures) + ")");
  if (p->graph->padded) {
    std::vector<int32_t> sq(d.B, static_cast<int32_t>(d.S)), skv(d.B, static_cast<int32_t>(d.Skv));
    p->seq_q = rt::DeviceBuffer::from(sq);
    p->seq_kv = rt::DeviceBuffer::from(skv);
  }
  return (plans_[key] = std::move(p)).get();
}

bool CudnnAttention::supports(const AttentionDesc& d, std::string* why_not) {
  return plan(d, why_not) != nullptr;
}

std::string CudnnAttention::plan_summary(const AttentionDesc& d) {
  Plan* p = plan(d, nullptr);
  return p ? p->summary : "";
}

void CudnnAttention::run(const AttentionDesc& d, const AttentionPtrs& ptrs, CUstream stream) {
  validate_attention_desc(d, kWho);
  validate_attention_ptrs(d, ptrs, kWho);
  const std::pair<const char*, CUdeviceptr> all[] = {{"Q", ptrs.q},     {"K", ptrs.k},
                                                     {"V", ptrs.v},     {"O", ptrs.o},
                                                     {"LSE", ptrs.lse}, {"lens", ptrs.lens}};
  for (const auto& [name, ptr] : all)
    if (!aligned16(ptr))
      user_error() << kWho << ": " << name << " pointer 0x" << std::hex << ptr
                   << " is not 16-byte aligned, which cuDNN requires";
  std::string why;
  Plan* p = plan(d, &why);
  if (!p) user_error() << why;
  const cudnn::Api& a = *cudnn::api();
  if (workspace_.bytes() < static_cast<size_t>(p->workspace))
    workspace_ = rt::DeviceBuffer(static_cast<size_t>(p->workspace));

  cudnn::SdpaGraph& g = *p->graph;
  std::vector<int64_t> uids = {cudnn::kUidQ, cudnn::kUidK, cudnn::kUidV, cudnn::kUidO,
                               cudnn::kUidScale};
  std::vector<void*> data = {reinterpret_cast<void*>(ptrs.q), reinterpret_cast<void*>(ptrs.k),
                             reinterpret_cast<void*>(ptrs.v), reinterpret_cast<void*>(ptrs.o),
                             &g.scale};
  auto bind = [&](int64_t uid, void* ptr) {
    uids.push_back(uid);
    data.push_back(ptr);
  };
  if (d.lse) bind(cudnn::kUidStats, reinterpret_cast<void*>(ptrs.lse));
  if (g.padded) {
    bind(cudnn::kUidNegInfPadding, &g.neg_inf);
    bind(cudnn::kUidSeqQ, reinterpret_cast<void*>(p->seq_q.ptr()));
    bind(cudnn::kUidSeqKv, reinterpret_cast<void*>(d.lens ? ptrs.lens : p->seq_kv.ptr()));
  }
  if (d.causal) {
    bind(cudnn::kUidNegInfCausal, &g.neg_inf);
    if (!g.padded) {
      bind(cudnn::kUidSq, &g.sq);
      bind(cudnn::kUidSkv, &g.skv);
    }
  }
  void* ws = p->workspace > 0 ? reinterpret_cast<void*>(workspace_.ptr()) : nullptr;
  std::vector<void*> key = data;
  key.push_back(ws);
  if (!p->pack.get() || p->pack_ptrs != key) {
    Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack of " + d.str());
    pack.set_int64s(TILEPILOT_ATTR(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS), uids)
        .set(TILEPILOT_ATTR(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS), CUDNN_TYPE_VOID_PTR,
             static_cast<int64_t>(data.size()), data.data())
        .set(TILEPILOT_ATTR(CUDNN_ATTR_VARIANT_PACK_WORKSPACE), CUDNN_TYPE_VOID_PTR, 1, &ws)
        .finalize();
    p->pack = std::move(pack);
    p->pack_ptrs = std::move(key);
  }
  auto handle = static_cast<cudnnHandle_t>(handle_);
  if (cudnnStatus_t s = a.cudnnSetStream(handle, stream); s != CUDNN_STATUS_SUCCESS)
    user_error() << kWho << ": cudnnSetStream failed with " << cudnn::status_text(s);
  if (cudnnStatus_t s = a.cudnnBackendExecute(handle, p->plan.get(), p->pack.get());
      s != CUDNN_STATUS_SUCCESS)
    user_error() << kWho << ": cudnnBackendExecute failed with " << cudnn::status_text(s) << " for "
                 << d.str() << " (" << p->summary << ", " << library_.describe() << ")";
}

} // namespace tp::ops
