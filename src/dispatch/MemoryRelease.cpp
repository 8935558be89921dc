// Releases that live in memory, and bucket keys.
#include "dispatch/DispatcherImpl.h"

namespace tp::dispatch {

std::string bucket_key(const ops::Problem& p, const ops::Config& c) {
  return p.op + " " + dtype_name(p.dtype) + " " + p.shape_str() + " | " + ops::config_str(c);
}

void install_release(ops::Dispatcher& d, pilot::Release r) {
  ops::Dispatcher::Impl& im = d.impl();
  std::string op = r.op;
  std::lock_guard<std::mutex> g(im.mu);
  im.slots[op] = slot_for(std::move(r));
  // Kernels and failures were keyed by bucket; a new release may pin other configs.
  im.broken.clear();
}

pilot::Release memory_release(const std::string& op, const ops::DeviceIdentity& dev,
                              const std::vector<std::pair<ops::Problem, ops::Config>>& pins) {
  pilot::Release r;
  r.dir = "(in memory)";
  r.op = op;
  r.device = dev.arch;
  // The same place a pilot-written manifest records the tested GPU (see released_device_name).
  r.manifest = {{"format", pilot::kReleaseFormat},
                {"operator", op},
                {"device", dev.arch},
                {"environment",
                 {{"gpus", nlohmann::json::array({{{"name", dev.name}, {"arch", dev.arch}}})}}}};
  for (const auto& [p, c] : pins) {
    if (p.op != op)
      user_error() << "dispatch: a " << op << " release cannot pin a " << p.op << " problem";
    r.pinned.push_back({p, c, "", ""});
    r.matrix.push_back({dev.arch, p, true, 0.0});
  }
  r.fallback = op == "gemm" ? "cuBLASLt" : "cuDNN SDPA";
  return r;
}

} // namespace tp::dispatch
