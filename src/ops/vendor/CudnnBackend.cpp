// Loading cuDNN and the descriptor wrapper.
#include "ops/vendor/CudnnBackend.h"

#include <cstdlib>

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

} // namespace tp::ops::cudnn
