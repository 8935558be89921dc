// The model-level measurement: set-up, agreement, profiles, interleaved timing.
#include "llama/ModelRun.h"

#include <chrono>
#include <cmath>
#include <memory>
#include <set>

#include "llama/DeviceExec.h"
#include "llama/HostExec.h"
#include "llama/Llama.h"

namespace tp::models {

namespace {

std::map<std::string, std::string> problem_kv(const ops::Problem& p) {
  std::map<std::string, std::string> kv = p.options;
  for (const auto& [k, v] : p.shape)
    kv[k] = std::to_string(v);
  return kv;
}

void compare(const HostTensor& got, const HostTensor& want, ModelRunResult& r) {
  double err2 = 0, ref2 = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = got.get(i), w = want.get(i), d = std::fabs(g - w);
    ++r.compared;
    if (!std::isfinite(g) || !std::isfinite(w) || d > r.atol + r.rtol * std::fabs(w)) {
      ++r.mismatched;
      if (!std::isfinite(d)) continue;
    }
    r.max_abs_err = std::max(r.max_abs_err, d);
    err2 += d * d;
    ref2 += w * w;
  }
  r.rel_l2_err = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  r.agree = r.mismatched == 0 && r.compared > 0;
}

double timed_forward(Exec& ex, LlamaModel& m) {
  if (auto* d = dynamic_cast<DeviceExec*>(&ex)) {
    Event start, stop;
    start.record(d->stream());
    m.forward();
    stop.record(d->stream());
    return Event::elapsed_ms(start, stop);
  }
  auto t0 = std::chrono::steady_clock::now();
  m.forward();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

/// One forward with per-operator timing; returns the times and sets `peak` (device only).
OpTimes profiled_forward(Exec& ex, LlamaModel& m, uint64_t* peak) {
  if (auto* d = dynamic_cast<DeviceExec*>(&ex)) {
    d->set_profiling(true);
    d->reset_peak();
    m.forward();
    OpTimes t = d->collect_op_times();
    d->set_profiling(false);
    *peak = d->peak_used_bytes() - std::min(d->peak_used_bytes(), d->baseline_used_bytes());
    return t;
  }
  auto& h = static_cast<HostExec&>(ex);
  h.reset_times();
  m.forward();
  *peak = 0;
  return h.op_times();
}

/// Pins every problem of `op` in the model to the operator's default config on this device.
void pin_defaults(ops::Dispatcher& d, const std::string& op, const LlamaModel& m, bool device) {
  ops::DeviceIdentity dev =
      device ? ops::current_device() : ops::DeviceIdentity{"CPU interpreter", "cpu"};
  std::vector<ops::Pin> pins;
  for (const auto& [label, p] : m.problems())
    if (p.op == op) pins.push_back({p, ops::default_config(p, dev.arch)});
  d.pin(op, dev, pins);
}

} // namespace

std::string op_family(const std::string& label) {
  return label.substr(0, label.find('.'));
}

double family_ms(const OpTimes& t, const std::string& family) {
  double ms = 0;
  for (const auto& [label, v] : t)
    if (op_family(label) == family) ms += v;
  return ms;
}

Bottleneck bottleneck(const OpTimes& t) {
  std::map<std::string, double> by_family;
  double all = 0;
  for (const auto& [label, v] : t) {
    by_family[op_family(label)] += v;
    all += v;
  }
  Bottleneck b;
  for (const auto& [family, ms] : by_family)
    if (b.family.empty() || ms > b.ms) b = {family, ms, 0};
  b.share = all > 0 ? b.ms / all : 0;
  return b;
}

ModelRunResult run_llama(const ModelRunOptions& o) {
  auto say = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  ModelRunResult r;
  r.model = o.config.str();
  r.on_device = o.device;
  r.atol = o.atol;
  r.rtol = o.rtol;
  for (const std::string& op : o.ops)
    ops::require_operator(op); // names the known ones if not

  std::unique_ptr<Exec> ex;
  if (o.device) {
    auto d = std::make_unique<DeviceExec>();
    r.device = d->device().name + " (" + d->device().arch + ")";
    ex = std::move(d);
  } else {
    ex = std::make_unique<HostExec>();
    r.device = "CPU interpreter";
  }
  say("initializing " + r.model + " on " + r.device);
  LlamaModel m(o.config, *ex);
  r.weight_bytes = m.weight_bytes();
  r.activation_bytes = m.activation_bytes();
  r.cache_bytes = m.cache_bytes();
  // The operators this path calls: each is dispatched in the kernel run (or forced to its
  // fallback there when left out of o.ops) and forced to its fallback in the fallback run.
  std::set<std::string> used;
  for (const auto& [label, p] : m.problems())
    used.insert(p.op);

  ops::Dispatcher kernel_d(o.dispatch);
  for (const auto& [op, pins] : o.pins)
    kernel_d.pin(
        op, o.device ? ops::current_device() : ops::DeviceIdentity{"CPU interpreter", "cpu"}, pins);
  for (const std::string& op : used) {
    if (!o.ops.empty() && !o.ops.count(op))
      kernel_d.force_fallback(op, true);
    else if (o.pin_defaults && !kernel_d.has_release(op))
      pin_defaults(kernel_d, op, m, o.device);
  }
  ops::DispatchOptions fo;
  fo.force_fallback = used;
  fo.disable_libraries = o.dispatch.disable_libraries;
  fo.log = o.dispatch.log;
  ops::Dispatcher fallback_d(fo);

  // The kernel path alone first, so its peak memory is measured before the fallback path has
  // allocated anything; then the fallback path; then interleaved timing of both.
  HostTensor logits[2];
  OpTimes* profiles[2] = {&r.kernel_ops, &r.fallback_ops};
  uint64_t* peaks[2] = {&r.kernel_peak_bytes, &r.process_peak_bytes};
  ops::Dispatcher* ds[2] = {&kernel_d, &fallback_d};
  for (int v = 0; v < 2; ++v) {
    ex->set_dispatcher(ds[v]);
    say(std::string(v ? "fallback" : "kernel") + " run: warm-up and profile");
    for (int w = 0; w < o.warmup; ++w)
      m.forward();
    logits[v] = ex->download(m.forward());
    ds[v]->reset_counters();
    *profiles[v] = profiled_forward(*ex, m, peaks[v]);
  }
  r.kernel_dispatch = kernel_d.summary();
  r.fallback_dispatch = fallback_d.summary();
  compare(logits[0], logits[1], r);
  for (const auto& [label, p] : m.problems())
    r.routes.push_back({label, p, kernel_d.decide(p.op, problem_kv(p), p.dtype, o.device)});

  say("timing " + std::to_string(o.runs) + " interleaved runs of each");
  for (int i = 0; i < o.runs; ++i) {
    // Alternate which variant goes first, so that drift (clocks, temperature) hits both alike.
    for (int j = 0; j < 2; ++j) {
      int v = (i + j) % 2;
      ex->set_dispatcher(ds[v]);
      (v ? r.fallback_ms : r.kernel_ms).push_back(timed_forward(*ex, m));
    }
  }
  r.stats = paired_stats(r.kernel_ms, r.fallback_ms);
  return r;
}

} // namespace tp::models
