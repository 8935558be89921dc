// The dispatcher's state: releases by operator, counters, what has been logged, and the kernels
// built so far. Internal; the model path and the pilot's model hook reach it through
// install_release().
#pragma once
#include <memory>
#include <mutex>

#include "dispatch/DeviceRun.h"
#include "dispatch/Routing.h"

namespace tp::ops {

struct Dispatcher::Impl {
  DispatchOptions opt;
  std::map<std::string, dispatch::ReleaseSlot> slots; // by operator

  mutable std::mutex mu; // guards everything below
  std::set<std::string> forced;
  std::map<std::string, OpCounters> counters;
  std::set<std::string> logged;
  // Pinned kernel programs by bucket (operator problem + config), host and device, and the
  // buckets whose pinned config failed to build or compile (reason and message).
  std::map<std::string, ops::KernelProgram> host_kernels;
  std::map<std::string, std::shared_ptr<ops::CudaProgram>> device_kernels;
  std::map<std::string, std::pair<FallbackReason, std::string>> broken;
  std::set<std::string> launched; // device buckets whose pinned kernel has launched once

  // Host-path caches of device calls (bench/bench_host_path measures them). A hot call repeats
  // the last call's shapes: its Problem and its bucket's key text are kept instead of being
  // rebuilt from strings on every call. Off (bench A/B only): every call rebuilds them.
  bool host_caches = true;
  struct ProblemMemo {
    std::vector<std::vector<int64_t>> shapes;
    std::vector<DType> dtypes;
    std::map<std::string, std::string> options;
    std::shared_ptr<const Problem> problem;
  };
  std::map<std::string, ProblemMemo> last_problem; // by operator: its last device call's
  // By pinned entry: "device|<bucket key>" and the LaunchContext text a fault names. An entry
  // lives in its release, so install_release() clears this with the release it replaces.
  struct BucketText {
    std::string key, context;
  };
  std::map<const release::PinnedEntry*, std::shared_ptr<const BucketText>> bucket_text;

  std::mutex device_mu; // serializes device execution (cuBLASLt / cuDNN handles)
  std::unique_ptr<dispatch::DeviceRun> device;
  std::optional<DeviceIdentity> device_id;

  const dispatch::ReleaseSlot* slot(const std::string& op) const;
  DeviceIdentity identity(const std::string& op, bool on_device);
  dispatch::Route route(const Problem& p, bool on_device);
  /// Writes `line` through the log sink the first time `key` is seen.
  void log_once(const std::string& key, const std::string& line);
  void count_pinned(const std::string& op);
  void count_fallback(const std::string& op, FallbackReason reason, const std::string& why,
                      const std::string& impl);
  dispatch::DeviceRun& device_run();
  /// The Problem of a device call (Operator::problem_for), kept while calls repeat it.
  std::shared_ptr<const Problem> device_problem(const std::string& op,
                                                const std::vector<DeviceView>& args,
                                                const std::map<std::string, std::string>& options);
};

/// How src/dispatch reaches a Dispatcher's state; nothing outside that layer does.
struct DispatcherAccess {
  static Dispatcher::Impl& impl(Dispatcher& d) { return *d.impl_; }
};

} // namespace tp::ops

namespace tp::dispatch {

/// Makes `r` the release of its operator in `d`, replacing any loaded one (the pilot's model
/// stage pins its current configs this way before a release folder exists).
void install_release(ops::Dispatcher& d, release::Release r);

/// A release in memory: each (problem, config) pinned on `dev` and recorded as tested and passed.
release::Release memory_release(const std::string& op, const ops::DeviceIdentity& dev,
                                const std::vector<std::pair<ops::Problem, ops::Config>>& pins);

/// One call on host tensors (parameter order; outputs written in place).
void run_host(ops::Dispatcher::Impl& im, const ops::Problem& p,
              const std::vector<HostTensor*>& args);
/// One call on device tensors (parameter order), enqueued on `stream`.
void run_device(ops::Dispatcher::Impl& im, const ops::Problem& p,
                const std::vector<cuda::DeviceTensor>& args, void* stream);
/// Whether the bucket `key` ("host|..." / "device|...") is known not to build or compile; if
/// so, turns `r` into that fallback.
bool known_broken(ops::Dispatcher::Impl& im, const std::string& key, Route& r);

/// The bucket key of a problem pinned with a config: "<op> bf16 K=..,M=..,N=..,layout=nt | bm=..".
std::string bucket_key(const ops::Problem& p, const ops::Config& c);
/// "device|" + bucket_key(p, entry's config) and the LaunchContext text naming it, made once
/// per pinned entry (p is the entry's problem: the route matched it exactly).
std::shared_ptr<const ops::Dispatcher::Impl::BucketText>
device_bucket_text(ops::Dispatcher::Impl& im, const Route& r, const ops::Problem& p);

} // namespace tp::dispatch
