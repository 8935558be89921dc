// The dispatcher: decide, run (pinned or fallback), count, log once.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "dispatch/DispatcherImpl.h"
#include "ops/ParseHelpers.h"

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
  case FallbackReason::device_out_of_memory:
    return "device_out_of_memory";
  case FallbackReason::framework_faster:
    return "framework_faster";
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

cuda::DeviceTensor device_tensor(const DeviceView& v, const std::string& op, size_t i) {
  if (v.ptr == 0)
    user_error() << "dispatch: " << op << " device tensor " << i << " has a null pointer";
  if (!v.strides.empty() && v.strides.size() != v.shape.size())
    user_error() << "dispatch: " << op << " device tensor " << i << " has " << v.strides.size()
                 << " strides for " << v.shape.size()
                 << " dimensions; give one stride per dimension, or none for a contiguous tensor";
  // A contiguous view travels without strides: the kernels' fast path, and one launch key.
  cuda::DeviceTensor t(v.ptr, v.dtype, v.shape, v.strides);
  if (t.contiguous()) t.strides.clear();
  return t;
}

/// User error naming the argument when a strided view reaches one the operator takes only
/// contiguous, or a strided one whose innermost stride is not 1 or whose start is not 16-byte
/// aligned (what the kernels' strided parameters need, CudaKernel::launch).
void check_views(const Operator& o, const Problem& p, const std::vector<cuda::DeviceTensor>& a) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].strides.empty()) continue;
    if (!o.strided_arg(p, i))
      user_error() << "dispatch: " << o.name() << " device tensor " << i
                   << " is a strided view (strides " << shape_text(a[i].strides) << " for shape "
                   << shape_text(a[i].shape) << "), and " << o.name()
                   << " takes it only contiguous; pass a contiguous copy (.contiguous())";
    if (a[i].strides.back() != 1)
      user_error() << "dispatch: " << o.name() << " device tensor " << i << " has innermost "
                   << "stride " << a[i].strides.back()
                   << "; strided views need a unit innermost stride, so pass a contiguous copy";
    // Checked here, not at the launch, so that a bad view never marks a pinned bucket broken.
    if (a[i].ptr % 16 != 0)
      user_error() << "dispatch: " << o.name() << " device tensor " << i << " is a strided view "
                   << "starting at an address that is not 16-byte aligned (address % 16 = "
                   << a[i].ptr % 16 << "); pass a contiguous copy";
  }
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

void Dispatcher::run(const std::string& op, const std::vector<HostTensor*>& args,
                     const std::map<std::string, std::string>& options) {
  std::vector<std::vector<int64_t>> shapes;
  std::vector<DType> dtypes;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i]) user_error() << "dispatch: " << op << " argument " << i << " is null";
    shapes.push_back(args[i]->shape());
    dtypes.push_back(args[i]->dtype());
  }
  Problem p = find_operator(op).problem_for(shapes, dtypes, options);
  dispatch::run_host(*impl_, p, args);
}

namespace {

bool same_call(const Dispatcher::Impl::ProblemMemo& m, const std::vector<DeviceView>& args,
               const std::map<std::string, std::string>& options) {
  if (m.shapes.size() != args.size() || m.options != options) return false;
  for (size_t i = 0; i < args.size(); ++i)
    if (m.shapes[i] != args[i].shape || m.dtypes[i] != args[i].dtype) return false;
  return true;
}

} // namespace

std::shared_ptr<const Problem>
Dispatcher::Impl::device_problem(const std::string& op, const std::vector<DeviceView>& args,
                                 const std::map<std::string, std::string>& options) {
  // problem_for is a pure function of the shapes, dtypes and options: a call that repeats its
  // operator's last one gets the same Problem (or the same user error, which is not kept).
  if (host_caches) {
    std::lock_guard<std::mutex> g(mu);
    if (auto it = last_problem.find(op);
        it != last_problem.end() && same_call(it->second, args, options))
      return it->second.problem;
  }
  ProblemMemo m;
  for (const DeviceView& a : args) {
    m.shapes.push_back(a.shape);
    m.dtypes.push_back(a.dtype);
  }
  m.options = options;
  m.problem =
      std::make_shared<const Problem>(find_operator(op).problem_for(m.shapes, m.dtypes, options));
  std::shared_ptr<const Problem> p = m.problem;
  if (host_caches) {
    std::lock_guard<std::mutex> g(mu);
    last_problem[op] = std::move(m);
  }
  return p;
}

void Dispatcher::run(const std::string& op, const std::vector<DeviceView>& args,
                     const std::map<std::string, std::string>& options, void* stream) {
  std::vector<cuda::DeviceTensor> tensors;
  tensors.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i)
    tensors.push_back(device_tensor(args[i], op, i));
  std::shared_ptr<const Problem> p = impl_->device_problem(op, args, options);
  if (!std::all_of(tensors.begin(), tensors.end(), [](auto& t) { return t.strides.empty(); }))
    check_views(find_operator(op), *p, tensors);
  dispatch::run_device(*impl_, *p, tensors, stream);
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

} // namespace tp::ops
