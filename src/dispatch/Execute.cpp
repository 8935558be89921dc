// Running one dispatched call: the route, the pinned kernel (built once per bucket, a failure
// remembered so it is not retried) or the fallback, then the counters.
#include "dispatch/DispatcherImpl.h"
#include "dispatch/HostRun.h"
#include "ops/CudaCheck.h"
#include "runtime/DeviceFaults.h"

namespace tp::dispatch {

using ops::Config;
using ops::Dispatcher;
using ops::FallbackReason;
using ops::find_operator;
using ops::Problem;

/// The pinned route's cached failure, if its bucket is known not to build or compile.
bool known_broken(Dispatcher::Impl& im, const std::string& key, Route& r) {
  std::lock_guard<std::mutex> g(im.mu);
  auto it = im.broken.find(key);
  if (it == im.broken.end()) return false;
  r.pinned = false;
  r.reason = it->second.first;
  r.why = it->second.second;
  return true;
}

namespace {

void mark_broken(Dispatcher::Impl& im, const std::string& key, Route& r, FallbackReason reason,
                 const std::string& why) {
  std::lock_guard<std::mutex> g(im.mu);
  im.broken[key] = {reason, why};
  r.pinned = false;
  r.reason = reason;
  r.why = why;
}

std::string build_failure(const Config& c, const std::string& what) {
  return "the pinned config " + ops::config_str(c) + " does not build or compile here: " + what;
}

// Out of device memory is a state of the moment (other allocations, other processes), not a
// property of the config: this call falls back, and the bucket is not marked broken.
void out_of_memory(Route& r, const Config& c, const char* when, const DeviceOutOfMemory& e) {
  r.pinned = false;
  r.reason = FallbackReason::device_out_of_memory;
  r.why = "the pinned config " + ops::config_str(c) + " ran out of device memory " + when + ": " +
          e.what();
}

} // namespace

void run_host(Dispatcher::Impl& im, const Problem& p, const std::vector<HostTensor*>& args) {
  Route r = im.route(p, false);
  if (r.pinned) {
    const Config cfg = r.entry->config;
    const std::string key = "host|" + bucket_key(p, cfg);
    ops::KernelProgram k;
    if (!known_broken(im, key, r)) {
      {
        std::lock_guard<std::mutex> g(im.mu);
        if (auto it = im.host_kernels.find(key); it != im.host_kernels.end()) k = it->second;
      }
      if (k.steps.empty()) {
        try {
          // A release's config is checked like any other before it is built.
          const ops::Operator& op = find_operator(p.op);
          ops::check_config(op, p, cfg, "cpu");
          k = ops::checked_program(op, p, cfg);
          std::lock_guard<std::mutex> g(im.mu);
          im.host_kernels[key] = k;
        } catch (const Error& e) {
          mark_broken(im, key, r, FallbackReason::compile_failed, build_failure(cfg, e.what()));
        }
      }
    }
    if (r.pinned) {
      run_interpreter(k, args);
      im.count_pinned(p.op);
      return;
    }
  }
  run_host_framework(p, args);
  im.count_fallback(p.op, r.reason, r.why, "fp64 CPU reference");
}

void run_device(Dispatcher::Impl& im, const Problem& p, const std::vector<cuda::DeviceTensor>& a,
                void* stream) {
  Route r = im.route(p, true);
  CUstream s = static_cast<CUstream>(stream);
  std::lock_guard<std::mutex> dg(im.device_mu);
  dispatch::DeviceRun& dev = im.device_run();
  if (r.pinned) {
    const Config& cfg = r.entry->config;
    const auto text = device_bucket_text(im, r, p);
    const std::string& key = text->key;
    std::shared_ptr<ops::CudaProgram> ck;
    if (!known_broken(im, key, r)) {
      {
        std::lock_guard<std::mutex> g(im.mu);
        if (auto it = im.device_kernels.find(key); it != im.device_kernels.end()) ck = it->second;
      }
      bool missing = false;
      try {
        // prepare() is a no-op once the variant these arguments need is loaded.
        if (!ck) {
          const ops::Operator& op = find_operator(p.op);
          ops::check_config(op, p, cfg, ops::device_arch());
          ck = dev.kernel(ops::checked_program(op, p, cfg));
        }
        dev.prepare(*ck, a, &missing);
        std::lock_guard<std::mutex> g(im.mu);
        im.device_kernels[key] = ck;
      } catch (const DeviceFault&) {
        throw; // the context is lost: no fallback can run either
      } catch (const DeviceOutOfMemory& e) {
        out_of_memory(r, cfg, "loading it", e);
      } catch (const Error& e) {
        mark_broken(im, key, r,
                    missing ? FallbackReason::library_missing : FallbackReason::compile_failed,
                    build_failure(cfg, e.what()));
      }
    }
    if (r.pinned) {
      bool first;
      {
        std::lock_guard<std::mutex> g(im.mu);
        first = !im.launched.count(key);
      }
      try {
        rt::LaunchContext context(text->context); // named by a fault's message
        ck->launch(a, s);
      } catch (const DeviceOutOfMemory& e) {
        out_of_memory(r, cfg, "at launch", e); // its workspace, or the launch itself
      } catch (const UserError& e) {
        // A bucket that never launched here (shared memory over this device's limit, a launch
        // the driver refuses) has a config that does not run on this device: fall back. The
        // arguments were checked already; once a bucket has launched, errors propagate.
        if (!first) throw;
        mark_broken(im, key, r, FallbackReason::compile_failed,
                    "the pinned config " + ops::config_str(cfg) +
                        " does not launch here: " + e.what());
      }
      if (r.pinned) {
        std::lock_guard<std::mutex> g(im.mu);
        im.launched.insert(key);
        ++im.counters[p.op].pinned;
        return;
      }
    }
  }
  std::string impl = dev.fallback(p, a, s);
  im.count_fallback(p.op, r.reason, r.why, impl);
}

} // namespace tp::dispatch
