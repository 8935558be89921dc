// Loading cuDNN and the descriptor wrapper.
#include "ops/vendor/CudnnBackend.h"

#include <algorithm>
#include <cstdlib>
#include <fmt/format.h>

#include "runtime/Driver.h"
#include "runtime/DynamicLibrary.h"
#include "tilepilot/error.h"

namespace tp::ops::cudnn {

std::optional<Api> load_api(std::string* why_not) {
  std::vector<std::string> candidates;
  const char* override_path = std::getenv("TILEPILOT_CUDNN_PATH");
  bool overridden = override_path && *override_path;
  if (overridden)
    candidates = {override_path};
  else
    candidates = rt::cuda_library_candidates({"libcudnn.so.9"});
  std::string tried;
  auto lib = rt::open_library(candidates, &tried);
  if (!lib) {
    if (why_not)
      *why_not = overridden
                     ? "cuDNN was not found at TILEPILOT_CUDNN_PATH=" + std::string(override_path) +
                           " (" + tried + "); point it at a libcudnn.so.9 file or unset it"
                     : "cuDNN was not found (tried libcudnn.so.9; set TILEPILOT_CUDNN_PATH "
                       "to the library file, e.g. the one in torch's lib folder):\n" +
                           tried;
    return std::nullopt;
  }
  Api a;
#define TILEPILOT_X(n)                                                                             \
  a.n = reinterpret_cast<decltype(a.n)>(lib->symbol(#n));                                          \
  if (!a.n) {                                                                                      \
    if (why_not)                                                                                   \
      *why_not = lib->path + " has no entry point " #n "; it is not a cuDNN 9 backend library";    \
    return std::nullopt;                                                                           \
  }
  TILEPILOT_CUDNN_FUNCS(TILEPILOT_X)
#undef TILEPILOT_X
  a.cudnnGetLastErrorString =
      reinterpret_cast<decltype(a.cudnnGetLastErrorString)>(lib->symbol("cudnnGetLastErrorString"));
  a.library = {"cuDNN", lib->path, a.cudnnGetVersion()};
  return a;
}

const Api* api(std::string* why_not) {
  static std::string why;
  static const std::optional<Api> a = load_api(&why);
  if (!a && why_not) *why_not = why;
  return a ? &*a : nullptr;
}

std::string status_text(cudnnStatus_t s) {
  const Api* a = api();
  if (!a) return "cuDNN status " + std::to_string(int(s));
  std::string text = a->cudnnGetErrorString(s);
  if (a->cudnnGetLastErrorString) {
    char buf[2048] = {};
    a->cudnnGetLastErrorString(buf, sizeof buf); // also clears it, so each message is fresh
    if (buf[0]) text += std::string(": ") + buf;
  }
  return text;
}

Desc::Desc(cudnnBackendDescriptorType_t type, std::string what) : what_(std::move(what)) {
  std::string why;
  const Api* a = api(&why);
  if (!a) user_error() << "cuDNN: " << why;
  cudnnStatus_t s = a->cudnnBackendCreateDescriptor(type, &d_);
  if (s != CUDNN_STATUS_SUCCESS)
    user_error() << "cuDNN: cudnnBackendCreateDescriptor failed for " << what_ << " with "
                 << status_text(s);
}

Desc::~Desc() {
  if (d_) api()->cudnnBackendDestroyDescriptor(d_);
}

Desc& Desc::operator=(Desc&& o) noexcept {
  if (this != &o) {
    if (d_) api()->cudnnBackendDestroyDescriptor(d_);
    d_ = o.d_;
    what_ = std::move(o.what_);
    o.d_ = nullptr;
  }
  return *this;
}

Desc& Desc::set(cudnnBackendAttributeName_t attr, const char* attr_name,
                cudnnBackendAttributeType_t type, int64_t count, const void* values) {
  cudnnStatus_t s = api()->cudnnBackendSetAttribute(d_, attr, type, count, values);
  if (s != CUDNN_STATUS_SUCCESS)
    user_error() << "cuDNN: setting " << attr_name << " on " << what_ << " failed with "
                 << status_text(s);
  return *this;
}

Desc& Desc::set_int64(cudnnBackendAttributeName_t attr, const char* name, int64_t v) {
  return set(attr, name, CUDNN_TYPE_INT64, 1, &v);
}

Desc& Desc::set_int64s(cudnnBackendAttributeName_t attr, const char* name,
                       const std::vector<int64_t>& v) {
  return set(attr, name, CUDNN_TYPE_INT64, static_cast<int64_t>(v.size()), v.data());
}

Desc& Desc::set_data_type(cudnnBackendAttributeName_t attr, const char* name, cudnnDataType_t t) {
  return set(attr, name, CUDNN_TYPE_DATA_TYPE, 1, &t);
}

Desc& Desc::set_bool(cudnnBackendAttributeName_t attr, const char* name, bool v) {
  return set(attr, name, CUDNN_TYPE_BOOLEAN, 1, &v);
}

Desc& Desc::set_desc(cudnnBackendAttributeName_t attr, const char* name, const Desc& v) {
  cudnnBackendDescriptor_t p = v.get();
  return set(attr, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p);
}

Desc& Desc::finalize() {
  cudnnStatus_t s = api()->cudnnBackendFinalize(d_);
  if (s != CUDNN_STATUS_SUCCESS)
    user_error() << "cuDNN: finalizing " << what_ << " failed with " << status_text(s);
  return *this;
}

cudnnHandle_t process_handle(std::string* why_not) {
  struct State {
    cudnnHandle_t handle = nullptr;
    std::string why_not;
  };
  static const State s = [] {
    State st;
    const Api* a = api(&st.why_not);
    if (!a) return st;
    if (a->library.version < 90000) {
      st.why_not = a->library.describe() + " is too old; TilePilot's cuDNN paths need cuDNN 9";
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
    if (cudnnStatus_t r = a->cudnnCreate(&st.handle); r != CUDNN_STATUS_SUCCESS) {
      st.handle = nullptr;
      st.why_not = "cudnnCreate failed with " + status_text(r) + " (" + a->library.describe() + ")";
    }
    return st;
  }();
  if (!s.handle && why_not) *why_not = s.why_not;
  return s.handle;
}

namespace {

/// The engine configs heuristics `mode` proposes for `op_graph`, best first; a failure is added
/// to `failures` and gives none.
std::vector<Desc> engine_configs(const Desc& op_graph, cudnnBackendHeurMode_t mode,
                                 const char* mode_name, std::vector<std::string>& failures) {
  const Api& a = *api();
  Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, mode_name);
  heur.set_desc(TILEPILOT_ATTR(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH), op_graph)
      .set(TILEPILOT_ATTR(CUDNN_ATTR_ENGINEHEUR_MODE), CUDNN_TYPE_HEUR_MODE, 1, &mode);
  if (cudnnStatus_t s = a.cudnnBackendFinalize(heur.get()); s != CUDNN_STATUS_SUCCESS) {
    failures.push_back(std::string(mode_name) + ": " + status_text(s));
    return {};
  }
  int64_t count = 0;
  a.cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                             CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr);
  std::vector<Desc> cfgs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    cfgs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config");
    raw.push_back(cfgs.back().get());
  }
  int64_t got = 0;
  if (count > 0) {
    if (cudnnStatus_t s =
            a.cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                       CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw.data());
        s != CUDNN_STATUS_SUCCESS) {
      failures.push_back(std::string(mode_name) + " results: " + status_text(s));
      return {};
    }
  }
  if (got <= 0) failures.push_back(std::string(mode_name) + ": no engine configs");
  cfgs.resize(static_cast<size_t>(std::max<int64_t>(got, 0)));
  return cfgs;
}

/// The global index of the engine an engine config names.
int64_t engine_index(const Desc& cfg) {
  const Api& a = *api();
  Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR, "engine");
  cudnnBackendDescriptor_t raw = engine.get();
  int64_t n = 0, index = -1;
  a.cudnnBackendGetAttribute(cfg.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                             1, &n, &raw);
  a.cudnnBackendGetAttribute(raw, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &index);
  return index;
}

} // namespace

std::optional<EnginePlan> first_engine_plan(const Desc& op_graph, cudnnHandle_t handle,
                                            std::vector<std::string>& failures) {
  const Api& a = *api();
  int candidates = 0;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    const char* mode_name = mode == CUDNN_HEUR_MODE_A ? "heuristics A" : "fallback heuristics";
    std::vector<Desc> cfgs = engine_configs(op_graph, mode, mode_name, failures);
    for (size_t i = 0; i < cfgs.size(); ++i, ++candidates) {
      Desc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "execution plan");
      plan.set(TILEPILOT_ATTR(CUDNN_ATTR_EXECUTION_PLAN_HANDLE), CUDNN_TYPE_HANDLE, 1, &handle)
          .set_desc(TILEPILOT_ATTR(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG), cfgs[i]);
      if (cudnnStatus_t s = a.cudnnBackendFinalize(plan.get()); s != CUDNN_STATUS_SUCCESS) {
        failures.push_back(fmt::format("{} config {}: {}", mode_name, i, status_text(s)));
        continue;
      }
      EnginePlan out;
      int64_t n = 0;
      a.cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                 CUDNN_TYPE_INT64, 1, &n, &out.workspace);
      out.engine =
          fmt::format("engine {} ({}, candidate {})", engine_index(cfgs[i]), mode_name, candidates);
      out.engine_cfg = std::move(cfgs[i]);
      out.plan = std::move(plan);
      return out;
    }
  }
  return std::nullopt;
}

std::string failure_summary(const std::vector<std::string>& failures) {
  std::string out;
  for (size_t i = 0; i < failures.size() && i < 4; ++i)
    out += (i ? "; " : "") + failures[i];
  if (failures.size() > 4) out += fmt::format("; ... ({} more)", failures.size() - 4);
  return out;
}

} // namespace tp::ops::cudnn
