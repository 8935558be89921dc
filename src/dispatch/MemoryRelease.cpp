// Releases that live in memory, and bucket keys.
#include "dispatch/DispatcherImpl.h"

namespace tp::dispatch {

std::string bucket_key(const ops::Problem& p, const ops::Config& c) {
  return p.op + " " + dtype_name(p.dtype) + " " + p.shape_str() + " | " + ops::config_str(c);
}

std::shared_ptr<const ops::Dispatcher::Impl::BucketText>
device_bucket_text(ops::Dispatcher::Impl& im, const Route& r, const ops::Problem& p) {
  if (im.host_caches) {
    std::lock_guard<std::mutex> g(im.mu);
    if (auto it = im.bucket_text.find(r.entry); it != im.bucket_text.end()) return it->second;
  }
  auto t = std::make_shared<ops::Dispatcher::Impl::BucketText>();
  t->key = "device|" + bucket_key(p, r.entry->config);
  t->context = "dispatched " + t->key; // named by a fault's message
  if (im.host_caches) {
    std::lock_guard<std::mutex> g(im.mu);
    im.bucket_text[r.entry] = t;
  }
  return t;
}

void install_release(ops::Dispatcher& d, release::Release r) {
  ops::Dispatcher::Impl& im = ops::DispatcherAccess::impl(d);
  std::string op = r.op;
  std::lock_guard<std::mutex> g(im.mu);
  im.slots[op] = slot_for(std::move(r));
  im.bucket_text.clear(); // keyed by the replaced release's entries
  // Kernels and failures were keyed by bucket; a new release may pin other configs.
  im.broken.clear();
}

release::Release memory_release(const std::string& op, const ops::DeviceIdentity& dev,
                                const std::vector<std::pair<ops::Problem, ops::Config>>& pins) {
  release::Release r;
  r.dir = "(in memory)";
  r.op = op;
  r.device = dev.arch;
  // The same place a pilot-written manifest records the tested GPU (see released_device_name).
  r.manifest = {{"format", release::kReleaseFormat},
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
  r.fallback = ops::find_operator(op).framework_name();
  return r;
}

} // namespace tp::dispatch

namespace tp::ops {

void Dispatcher::pin(const std::string& op, const DeviceIdentity& device,
                     const std::vector<Pin>& pins) {
  std::vector<std::pair<Problem, Config>> pairs;
  for (const Pin& p : pins)
    pairs.emplace_back(p.problem, p.config);
  dispatch::install_release(*this, dispatch::memory_release(op, device, pairs));
}

bool Dispatcher::has_release(const std::string& op, std::string* source) const {
  std::lock_guard<std::mutex> g(impl_->mu); // install_release writes slots under it
  const dispatch::ReleaseSlot* s = impl_->slot(op);
  if (s && source) *source = s->release ? s->release->dir : "(invalid: " + s->load_error + ")";
  return s != nullptr;
}

DeviceIdentity current_device() {
  return dispatch::current_device();
}

Config default_config(const Problem& p, const std::string& arch) {
  return find_operator(p.op).default_config(p, arch);
}

void require_operator(const std::string& op) {
  find_operator(op);
}

} // namespace tp::ops
