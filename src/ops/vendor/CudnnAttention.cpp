// CudnnAttention: the process-wide handle, per-problem execution plans (graph -> heuristics ->
// first engine config that finalizes), and execution with a cached variant pack.
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

struct HandleState {
  cudnnHandle_t handle = nullptr;
  std::string why_not;
};

/// One handle for the process, in the primary context of the selected device. Never destroyed:
/// plans made from it may live until exit.
const HandleState& handle_state() {
  static const HandleState s = [] {
    HandleState st;
    const cudnn::Api* a = cudnn::api(&st.why_not);
    if (!a) return st;
    if (a->library.version < 90000) {
      st.why_not = a->library.describe() + " is too old; cuDNN attention needs cuDNN 9";
      return st;
    }
    std::string why;
    if (rt::device_count(&why) == 0) {
      st.why_not = a->library.describe() + " was found, but there is no usable GPU: " + why;
      return st;
    }
    try {
      rt::ensure_context(); // cuDNN's runtime calls then use our primary context
    } catch (const Error& e) {
      st.why_not = e.what();
      return st;
    }
    cudnnStatus_t s = a->cudnnCreate(&st.handle);
    if (s != CUDNN_STATUS_SUCCESS) {
      st.handle = nullptr;
      st.why_not =
          "cudnnCreate failed with " + cudnn::status_text(s) + " (" + a->library.describe() + ")";
    }
    return st;
  }();
  return s;
}

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
  const HandleState& s = handle_state();
  if (!s.handle && why_not) *why_not = s.why_not;
  return s.handle != nullptr;
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
  handle_ = handle_state().handle;
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

  const cudnn::Api& a = *cudnn::api();
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
    int64_t candidates = 0;
    for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
      const char* mode_name = mode == CUDNN_HEUR_MODE_A ? "heuristics A" : "fallback heuristics";
      Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, mode_name);
      heur.set_desc(TILEPILOT_ATTR(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH), p->op_graph)
          .set(TILEPILOT_ATTR(CUDNN_ATTR_ENGINEHEUR_MODE), CUDNN_TYPE_HEUR_MODE, 1, &mode);
      if (cudnnStatus_t s = a.cudnnBackendFinalize(heur.get()); s != CUDNN_STATUS_SUCCESS) {
        failures.push_back(std::string(mode_name) + ": " + cudnn::status_text(s));
        continue;
      }
      int64_t count = 0;
      a.cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr);
      if (count <= 0) {
        failures.push_back(std::string(mode_name) + ": no engine configs");
        continue;
      }
      std::vector<Desc> cfgs;
      std::vector<cudnnBackendDescriptor_t> raw;
      for (int64_t i = 0; i < count; ++i) {
        cfgs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config");
        raw.push_back(cfgs.back().get());
      }
      int64_t got = 0;
      if (cudnnStatus_t s =
              a.cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                         CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw.data());
          s != CUDNN_STATUS_SUCCESS) {
        failures.push_back(std::string(mode_name) + " results: " + cudnn::status_text(s));
        continue;
      }
      for (int64_t i = 0; i < got && !p->plan.get(); ++i, ++candidates) {
        Desc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "execution plan");
        plan.set(TILEPILOT_ATTR(CUDNN_ATTR_EXECUTION_PLAN_HANDLE), CUDNN_TYPE_HANDLE, 1, &handle)
            .set_desc(TILEPILOT_ATTR(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG), cfgs[i]);
        if (cudnnStatus_t s = a.cudnnBackendFinalize(plan.get()); s != CUDNN_STATUS_SUCCESS) {
          failures.push_back(fmt::format("{} config {}: {}", mode_name, i, cudnn::status_text(s)));
          continue;
        }
        Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR, "engine");
        cudnnBackendDescriptor_t engine_raw = engine.get();
        int64_t n = 0, index = -1;
        a.cudnnBackendGetAttribute(cfgs[i].get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &engine_raw);
        a.cudnnBackendGetAttribute(engine_raw, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1,
                                   &n, &index);
        a.cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                   CUDNN_TYPE_INT64, 1, &n, &p->workspace);
        p->summary =
            fmt::format("engine {} ({}, candidate {}), workspace {} B, {} graph", index, mode_name,
                        candidates, p->workspace, p->graph->padded ? "padded" : "dense");
        p->engine_cfg = std::move(cfgs[i]);
        p->plan = std::move(plan);
      }
      if (p->plan.get()) break;
    }
  } catch (const UserError& e) {
    return refuse(e.what());
  }
  if (!p->plan.get()) {
    std::string reasons;
    for (size_t i = 0; i < failures.size() && i < 4; ++i)
      reasons += (i ? "; " : "") + failures[i];
    if (failures.size() > 4) reasons += fmt::format("; ... ({} more)", failures.size() - 4);
    return refuse("no cuDNN engine accepts this graph (" + reasons + ")");
  }
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
