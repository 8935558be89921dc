// The dispatcher: decide, run (pinned or fallback), count, log once.
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "dispatch/DispatcherImpl.h"

namespace tp::ops {

const char* fallback_reason_name(FallbackReason r) {
  switch (r) {
  case FallbackReason::forced:
    return "forced";
  case FallbackReason::no_release:
    return "no_release";
  case FallbackReason::release_invalid:
    return "release_invalid";
  case FallbackReason::device_mismatch:
    return "device_mismatch";
  case FallbackReason::dtype_outside_matrix:
    return "dtype_outside_matrix";
  case FallbackReason::shape_outside_matrix:
    return "shape_outside_matrix";
  case FallbackReason::failed_test:
    return "failed_test";
  case FallbackReason::compile_failed:
    return "compile_failed";
  case FallbackReason::library_missing:
    return "library_missing";
  }
  return "?";
}

int64_t OpCounters::fallbacks() const {
  int64_t n = 0;
  for (int64_t c : fallback)
    n += c;
  return n;
}

// ---- Impl ----------------------------------------------------------------------------------

const dispatch::ReleaseSlot* Dispatcher::Impl::slot(const std::string& op) const {
  auto it = slots.find(op);
  return it == slots.end() ? nullptr : &it->second;
}

DeviceIdentity Dispatcher::Impl::identity(const std::string& op, bool on_device) {
  if (opt.device) return *opt.device;
  if (!on_device) return dispatch::host_identity(slot(op));
  std::lock_guard<std::mutex> g(mu);
  if (!device_id) device_id = dispatch::current_device();
  return *device_id;
}

dispatch::Route Dispatcher::Impl::route(const Problem& p, bool on_device) {
  bool is_forced;
  {
    std::lock_guard<std::mutex> g(mu);
    is_forced = forced.count(p.op) > 0;
  }
  // Forced calls never look at the device, so they also run where identity() would fail.
  DeviceIdentity dev = is_forced ? DeviceIdentity{} : identity(p.op, on_device);
  return dispatch::route(slot(p.op), dev, p, is_forced);
}

void Dispatcher::Impl::log_once(const std::string& key, const std::string& line) {
  {
    std::lock_guard<std::mutex> g(mu);
    if (!logged.insert(key).second) return;
  }
  if (opt.log)
    opt.log(line);
  else
    std::cerr << "tilepilot: dispatch: " << line << "\n";
}

void Dispatcher::Impl::count_pinned(const std::string& op) {
  std::lock_guard<std::mutex> g(mu);
  ++counters[op].pinned;
}

void Dispatcher::Impl::count_fallback(const std::string& op, FallbackReason reason,
                                      const std::string& why, const std::string& impl) {
  {
    std::lock_guard<std::mutex> g(mu);
    OpCounters& c = counters[op];
    ++c.fallback[static_cast<int>(reason)];
    ++c.fallback_impl[impl];
  }
  log_once(op + "/" + fallback_reason_name(reason),
           op + " falls back to " + impl + " (" + fallback_reason_name(reason) + "): " + why +
               " [logged once per reason; every call is counted]");
}

dispatch::DeviceRun& Dispatcher::Impl::device_run() {
  if (!device)
    device = std::make_unique<dispatch::DeviceRun>(
        opt.disable_libraries,
        [this](const std::string& key, const std::string& line) { log_once(key, line); });
  return *device;
}

namespace {

cuda::DeviceTensor device_tensor(const DeviceView& v, const char* name) {
  if (v.ptr == 0) user_error() << "dispatch: device tensor " << name << " has a null pointer";
  return {static_cast<CUdeviceptr>(v.ptr), v.dtype, v.shape};
}

} // namespace

// ---- Dispatcher ----------------------------------------------------------------------------

Dispatcher::Dispatcher(DispatchOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->opt = std::move(options);
  impl_->slots = dispatch::load_releases(impl_->opt.releases);
  for (const std::string& op : impl_->opt.force_fallback)
    force_fallback(op, true);
}

Dispatcher::~Dispatcher() = default;

void Dispatcher::gemm(const HostTensor& A, const HostTensor& B, HostTensor& C,
                      const std::string& layout) {
  Problem p = dispatch::gemm_problem(A.dtype(), layout, A.shape(), B.shape(), C.shape(), B.dtype(),
                                     C.dtype());
  dispatch::run_host(*impl_, p, {&A, &B}, C);
}

void Dispatcher::attention(const HostTensor& Q, const HostTensor& K, const HostTensor& V,
                           HostTensor& O, bool causal) {
  Problem p = dispatch::attention_problem(Q.dtype(), Q.shape(), K.shape(), V.shape(), O.shape(),
                                          causal, K.dtype(), V.dtype(), O.dtype());
  dispatch::run_host(*impl_, p, {&Q, &K, &V}, O);
}

void Dispatcher::gemm(const DeviceView& A, const DeviceView& B, const DeviceView& C,
                      const std::string& layout, void* stream) {
  Problem p = dispatch::gemm_problem(A.dtype, layout, A.shape, B.shape, C.shape, B.dtype, C.dtype);
  dispatch::run_device(
      *impl_, p, {device_tensor(A, "A"), device_tensor(B, "B"), device_tensor(C, "C")}, stream);
}

void Dispatcher::attention(const DeviceView& Q, const DeviceView& K, const DeviceView& V,
                           const DeviceView& O, bool causal, void* stream) {
  Problem p = dispatch::attention_problem(Q.dtype, Q.shape, K.shape, V.shape, O.shape, causal,
                                          K.dtype, V.dtype, O.dtype);
  dispatch::run_device(
      *impl_, p,
      {device_tensor(Q, "Q"), device_tensor(K, "K"), device_tensor(V, "V"), device_tensor(O, "O")},
      stream);
}

DispatchDecision Dispatcher::decide(const std::string& op,
                                    const std::map<std::string, std::string>& shape, DType dtype,
                                    bool device) {
  Problem p = find_operator(op).parse(shape, dtype);
  dispatch::Route r = impl_->route(p, device);
  if (r.pinned)
    dispatch::known_broken(
        *impl_,
        std::string(device ? "device|" : "host|") + dispatch::bucket_key(p, r.entry->config), r);
  DispatchDecision d;
  d.pinned = r.pinned;
  d.reason = r.reason;
  d.why = r.why;
  if (r.pinned) d.config = r.entry->config;
  return d;
}

void Dispatcher::force_fallback(const std::string& op, bool on) {
  find_operator(op); // a user error naming the known operators when `op` is not one
  std::lock_guard<std::mutex> g(impl_->mu);
  if (on)
    impl_->forced.insert(op);
  else
    impl_->forced.erase(op);
}

OpCounters Dispatcher::counters(const std::string& op) const {
  std::lock_guard<std::mutex> g(impl_->mu);
  auto it = impl_->counters.find(op);
  return it == impl_->counters.end() ? OpCounters{} : it->second;
}

void Dispatcher::reset_counters() {
  std::lock_guard<std::mutex> g(impl_->mu);
  impl_->counters.clear();
}

std::string Dispatcher::summary() const {
  std::lock_guard<std::mutex> g(impl_->mu);
  std::ostringstream os;
  for (const auto& [op, c] : impl_->counters) {
    os << op << ": " << c.pinned << " pinned, " << c.fallbacks() << " fallback";
    std::string sep = " (";
    for (int i = 0; i < kFallbackReasons; ++i)
      if (c.fallback[i]) {
        os << sep << fallback_reason_name(static_cast<FallbackReason>(i)) << " " << c.fallback[i];
        sep = ", ";
      }
    for (const auto& [impl, n] : c.fallback_impl) {
      os << sep << "via " << impl << " " << n;
      sep = ", ";
    }
    os << (sep == ", " ? ")" : "") << "\n";
  }
  return os.str();
}

Dispatcher& default_dispatcher() {
  // Never destroyed: its cuBLASLt / cuDNN handles and device buffers would otherwise be freed
  // after the driver's own static state at exit.
  static Dispatcher* d = new Dispatcher([] {
    DispatchOptions o;
    if (const char* env = std::getenv("TILEPILOT_RELEASE")) {
      std::stringstream ss(env);
      for (std::string dir; std::getline(ss, dir, ':');)
        if (!dir.empty()) o.releases.push_back(dir);
    }
    return o;
  }());
  return *d;
}

void gemm(const HostTensor& A, const HostTensor& B, HostTensor& C, const std::string& layout) {
  default_dispatcher().gemm(A, B, C, layout);
}
void attention(const HostTensor& Q, const HostTensor& K, const HostTensor& V, HostTensor& O,
               bool causal) {
  default_dispatcher().attention(Q, K, V, O, causal);
}
void gemm(const DeviceView& A, const DeviceView& B, const DeviceView& C, const std::string& layout,
          void* stream) {
  default_dispatcher().gemm(A, B, C, layout, stream);
}
void attention(const DeviceView& Q, const DeviceView& K, const DeviceView& V, const DeviceView& O,
               bool causal, void* stream) {
  default_dispatcher().attention(Q, K, V, O, causal, stream);
}

} // namespace tp::ops
