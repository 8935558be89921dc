// The tuner's search loop: compile ahead on the pool; per candidate, in order, the post-compile
// checks; then on a free device's worker a brief timing and (unless early stop is certain) the
// full one; then, folded in candidate order, the early stop, limits and the correctness check of
// any candidate that would become the best.
#include "autotune/Tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <future>
#include <limits>
#include <sstream>
#include <thread>

#include "autotune/CompilePool.h"
#include "autotune/DeviceWorkers.h"
#include "autotune/Progress.h"
#include "tilepilot/device_error.h"
#include "tilepilot/error.h"

namespace tp::autotune {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string ms_str(double ms) {
  std::ostringstream s;
  s.precision(4);
  s << ms << " ms";
  return s.str();
}

// Runs a check/measure hook; returns "" or why it failed ("measure threw: ..."). A DeviceFault
// is not one candidate's problem: the context is lost, so it propagates and tune() stops the
// search (on a device worker it reaches the fold through the candidate's future).
template <typename F>
std::string guarded(const char* what, F&& f) {
  try {
    f();
    return "";
  } catch (const DeviceFault&) {
    throw;
  } catch (const std::exception& e) {
    return std::string(what) + " threw: " + e.what();
  } catch (...) {
    return std::string(what) + " threw a non-standard exception";
  }
}

struct Best {
  size_t index = std::numeric_limits<size_t>::max();
  double ms = std::numeric_limits<double>::infinity();
  Measurement measurement;
  bool found() const { return index != std::numeric_limits<size_t>::max(); }
};

// What a device worker measured for one candidate, before any decision that depends on the
// candidates before it: the brief timing and, unless early stop is already certain, the full one.
struct Probe {
  std::string brief_error, full_error; // guarded(): "" when the call returned
  Measurement brief, full;
  double brief_s = -1, total_s = -1;
  bool full_run = false;
};

// Runs on the candidate's device worker. `best_ms` is the best median folded so far (infinity
// when none). Bests only get faster as the fold goes on and the ratio is >= 0, so a brief median
// over ratio x best_ms is over ratio x the best at the candidate's fold too: skipping the full
// timing then skips nothing the one-device search would run. Otherwise the full timing is taken
// even if the fold may still early-stop the candidate (a faster best may arrive in between); the
// fold then ignores it.
Probe probe(const TuneHooks& hooks, const TuneOptions& o, int device, const ops::Config& cfg,
            const CompiledCandidate& cc, double best_ms) {
  Probe p;
  auto t0 = Clock::now();
  p.brief_error =
      guarded("measure", [&] { p.brief = hooks.measure(device, cfg, cc, o.brief_iters); });
  p.brief_s = since(t0);
  double brief_ms = p.brief.median_ms();
  if (!p.brief_error.empty() || !std::isfinite(brief_ms) || brief_ms < 0 ||
      p.brief_s > o.per_config_seconds)
    return p;
  if (o.early_stop_ratio >= 0 && brief_ms > o.early_stop_ratio * best_ms) return p;
  p.full_error = guarded("measure", [&] { p.full = hooks.measure(device, cfg, cc, o.full_iters); });
  p.total_s = since(t0);
  p.full_run = p.full_error.empty();
  return p;
}

// One candidate in flight: compiled, and (when `device` >= 0) measured or being measured there.
struct Pending {
  size_t index = 0;
  CandidateLog log;
  int device = -1; // the device it holds until it is folded; -1: decided without measuring
  CompiledCandidate compiled;
  Probe probe;
  std::future<void> measured;
};

void decide(CandidateLog& log, CandidateStatus status, std::string reason) {
  log.status = status;
  log.reason = std::move(reason);
}

// The decisions of the one-device search, in candidate order, from the candidate's probe: early
// stop against the best so far, the limits, and the check of a would-be best, run on the device
// that measured it. Fills `p.log`; updates `best` when the candidate wins so far.
void fold(const TuneHooks& hooks, const TuneOptions& o, DeviceWorkers& workers, Pending& p,
          Best& best) {
  CandidateLog& log = p.log;
  std::string worker_error = guarded("device worker", [&] { p.measured.get(); });
  if (!worker_error.empty()) return decide(log, CandidateStatus::run_failed, worker_error);
  const Probe& pr = p.probe;
  if (!pr.brief_error.empty()) return decide(log, CandidateStatus::run_failed, pr.brief_error);
  log.brief_median_ms = pr.brief.median_ms();
  if (!std::isfinite(log.brief_median_ms) || log.brief_median_ms < 0)
    return decide(log, CandidateStatus::run_failed, "measure returned no valid samples");
  if (pr.brief_s > o.per_config_seconds) {
    log.measure_s = pr.brief_s;
    return decide(log, CandidateStatus::timed_out,
                  "brief measurement took " + std::to_string(log.measure_s) + " s > limit " +
                      std::to_string(o.per_config_seconds) + " s");
  }
  if (best.found() && log.brief_median_ms > o.early_stop_ratio * best.ms) {
    log.measure_s = pr.brief_s;
    std::ostringstream why;
    why << "brief median " << ms_str(log.brief_median_ms) << " over " << pr.brief.ms.size()
        << " runs > " << o.early_stop_ratio << " x best " << ms_str(best.ms);
    return decide(log, CandidateStatus::early_stopped, why.str());
  }
  internal_assert(pr.full_run || !pr.full_error.empty())
      << "the probe stopped early although the fold would not";
  if (!pr.full_error.empty()) return decide(log, CandidateStatus::run_failed, pr.full_error);
  log.measure_s = pr.total_s;
  log.median_ms = pr.full.median_ms();
  log.iqr_ms = pr.full.iqr_ms();
  if (!std::isfinite(log.median_ms) || log.median_ms < 0)
    return decide(log, CandidateStatus::run_failed, "measure returned no valid samples");
  if (log.measure_s > o.per_config_seconds)
    return decide(log, CandidateStatus::timed_out,
                  "measurement took " + std::to_string(log.measure_s) + " s > limit " +
                      std::to_string(o.per_config_seconds) + " s");
  log.status = CandidateStatus::measured;
  if (best.found() && log.median_ms >= best.ms) {
    log.reason = "median " + ms_str(log.median_ms) + " >= best " + ms_str(best.ms) +
                 "; not checked (cannot win)";
    return;
  }
  // Only a checked candidate may become the best, so a fast wrong kernel never wins.
  if (!hooks.check_correct)
    return decide(log, CandidateStatus::incorrect,
                  "no check_correct hook: an unchecked candidate cannot win");
  auto c0 = Clock::now();
  bool ok = false;
  std::string why;
  std::string error;
  std::string worker = guarded("device worker", [&] {
    workers
        .run(p.device,
             [&] {
               error = guarded("check_correct", [&] {
                 ok = hooks.check_correct(p.device, log.config, p.compiled, &why);
               });
             })
        .get();
  });
  if (!worker.empty() || !error.empty())
    return decide(log, CandidateStatus::run_failed, worker.empty() ? error : worker);
  log.check_s = since(c0);
  if (!ok)
    return decide(log, CandidateStatus::incorrect, why.empty() ? "check_correct failed" : why);
  log.reason = "correct";
  best.index = p.index;
  best.ms = log.median_ms;
  best.measurement = pr.full;
}

CandidateLog log_for(const Candidate& c) {
  CandidateLog log;
  log.config = c.config;
  log.smem_bytes = c.smem_bytes;
  log.acc_regs = c.acc_regs;
  log.reason = c.reason;
  return log;
}

} // namespace

const char* status_name(CandidateStatus s) {
  switch (s) {
  case CandidateStatus::pruned:
    return "pruned";
  case CandidateStatus::verify_failed:
    return "verify_failed";
  case CandidateStatus::compile_failed:
    return "compile_failed";
  case CandidateStatus::spills:
    return "spills";
  case CandidateStatus::timed_out:
    return "timed_out";
  case CandidateStatus::run_failed:
    return "run_failed";
  case CandidateStatus::compiled:
    return "compiled";
  case CandidateStatus::early_stopped:
    return "early_stopped";
  case CandidateStatus::measured:
    return "measured";
  case CandidateStatus::incorrect:
    return "incorrect";
  case CandidateStatus::best:
    return "best";
  case CandidateStatus::skipped:
    return "skipped";
  }
  return "?";
}

const CandidateLog* TuneResult::best_log() const {
  for (const CandidateLog& c : log)
    if (c.status == CandidateStatus::best) return &c;
  return nullptr;
}

std::map<std::string, int64_t> TuneResult::status_counts() const {
  std::map<std::string, int64_t> out;
  for (const CandidateLog& c : log)
    ++out[status_name(c.status)];
  return out;
}

namespace {

// Prepares candidate `p.index`: the budget, its compile, the post-compile checks. Returns whether
// it needs measuring (then `p.compiled` holds what to measure).
bool prepare(const TuneHooks& hooks, const TuneOptions& o, Clock::time_point t0, CompilePool& pool,
             Pending& p) {
  CandidateLog& log = p.log;
  if (o.budget_seconds > 0 && since(t0) > o.budget_seconds) {
    decide(log, CandidateStatus::skipped,
           "budget of " + std::to_string(o.budget_seconds) + " s spent");
    return false;
  }
  CompilePool::Outcome out = pool.wait(p.index);
  log.compile_s = out.seconds;
  using Kind = CompilePool::Outcome::Kind;
  if (out.kind == Kind::timed_out) {
    decide(log, CandidateStatus::timed_out,
           "compile took longer than the limit of " + std::to_string(o.per_config_seconds) + " s");
  } else if (out.kind == Kind::user_error) {
    decide(log, CandidateStatus::verify_failed, out.error);
  } else if (out.kind == Kind::error) {
    decide(log, CandidateStatus::compile_failed, out.error);
  } else if (log.registers = out.compiled.usage.registers;
             !post_compile_reject(out.compiled.usage).empty()) {
    decide(log, CandidateStatus::spills, post_compile_reject(out.compiled.usage));
  } else if (!hooks.measure) {
    decide(log, CandidateStatus::compiled,
           hooks.why_no_measure.empty() ? "compile only: no measure hook"
                                        : "compile only: " + hooks.why_no_measure);
  } else {
    p.compiled = std::move(out.compiled);
    return true;
  }
  return false;
}

} // namespace

// With D devices, up to D candidates are measured at once, each on its own device's worker,
// and folded strictly in candidate order by the same rules as one device. What is identical
// for any D: given the same measurements (samples per config), the statuses, reasons, medians,
// the winner, which candidates were checked and how often, and so the tuning-db entry and
// status counts. What is not: the timings themselves on real GPUs (two devices of one model
// still differ by clocks and temperature, so a close race can go either way), the wall and
// per-stage seconds, which candidates a wall-clock budget reaches (D devices reach more), and
// the number of measure calls (a candidate is timed fully unless its early stop is already
// certain when it starts; see probe()). A device measures one candidate at a time, so no two
// timings overlap on one device; a device stays with its candidate until it is folded.
TuneResult tune(const ConfigSpace& space, const TuneHooks& hooks, const TuneOptions& o) {
  if (!hooks.compile)
    user_error() << "tune: no compile hook; the CUDA backend provides one through "
                    "tp::autotune::set_default_hooks, or pass TuneHooks explicitly";
  if (hooks.measure && hooks.devices < 1)
    user_error() << "tune: the hooks measure on " << hooks.devices
                 << " devices; a backend that measures needs at least 1";
  auto t0 = Clock::now();
  TuneResult r;
  r.neutral = space.neutral;
  Best best;
  std::string faulted; // the config that faulted, once one has
  const size_t n = space.kept.size();
  {
    std::vector<ops::Config> configs;
    for (const Candidate& c : space.kept)
      configs.push_back(c.config);
    int threads = o.compile_threads > 0
                      ? o.compile_threads
                      : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    const int devices = hooks.measure ? hooks.devices : 1;
    // Compile-only runs may race ahead freely; with measurement, a few configs per thread (and
    // device) ahead keep the GPUs fed without holding hundreds of loaded modules.
    size_t window = hooks.measure ? static_cast<size_t>(4 * std::max(threads, devices)) : n;
    CompilePool pool(hooks.compile, std::move(configs), threads, window, o.per_config_seconds);
    bool draw =
        o.progress == TuneOptions::Progress::on ||
        (o.progress == TuneOptions::Progress::automatic && ProgressBar::stderr_is_terminal());
    ProgressBar bar(draw, o.label.empty() ? "tune" : o.label, n);
    bar.update(0, "");
    std::deque<Pending> pending; // candidate order; outlives the workers that fill its probes
    std::vector<bool> busy(devices, false);
    DeviceWorkers workers(devices);
    size_t next = 0;
    while (next < n || !pending.empty()) {
      if (r.device_fault) {
        // Every GPU call fails once a context is lost; measuring on would fail each later
        // candidate with the same error, so the rest are skipped with the cause instead. The
        // ones in flight on other devices are waited for (their workers still use them).
        auto skip = [&](CandidateLog log) {
          decide(log, CandidateStatus::skipped,
                 "not measured: the GPU context was lost when " + faulted + " faulted");
          r.log.push_back(std::move(log));
        };
        for (Pending& q : pending) {
          if (q.measured.valid()) q.measured.wait();
          if (q.device >= 0)
            skip(std::move(q.log));
          else
            r.log.push_back(std::move(q.log)); // decided before the fault (compile, budget)
        }
        pending.clear();
        for (; next < n; ++next)
          skip(log_for(space.kept[next]));
        break;
      }
      // Start candidates while a device is free; each is measured against the best so far.
      for (auto free = std::find(busy.begin(), busy.end(), false); next < n && free != busy.end();
           free = std::find(busy.begin(), busy.end(), false)) {
        Pending& p = pending.emplace_back();
        p.index = next;
        p.log = log_for(space.kept[next++]);
        if (!prepare(hooks, o, t0, pool, p)) continue;
        p.device = static_cast<int>(free - busy.begin());
        *free = true;
        double best_ms = best.ms;
        p.measured = workers.run(p.device, [&hooks, &o, &p, best_ms] {
          p.probe = probe(hooks, o, p.device, p.log.config, p.compiled, best_ms);
        });
      }
      Pending& p = pending.front();
      if (p.device >= 0) {
        try {
          fold(hooks, o, workers, p, best);
        } catch (const DeviceFault& e) {
          decide(p.log, CandidateStatus::run_failed,
                 "the GPU faulted running this config: " + reason_text(e));
          r.device_fault = std::current_exception();
          faulted = ops::config_str(p.log.config);
        }
        busy[p.device] = false;
      }
      r.log.push_back(std::move(p.log));
      pending.pop_front(); // drops the artifact: the candidate is decided
      bar.update(r.log.size(), best.found() ? "best " + ms_str(best.ms) + " " +
                                                  ops::config_str(r.log[best.index].config)
                                            : "");
    }
  } // the pool waits here for compiles still running (each at most its limit)
  if (best.found() && !r.device_fault) { // after a fault nothing is a result to store
    r.found = true;
    r.best = r.log[best.index].config;
    r.best_measurement = std::move(best.measurement);
    r.log[best.index].status = CandidateStatus::best;
    for (CandidateLog& c : r.log)
      if (c.status == CandidateStatus::measured && c.reason == "correct")
        c.reason = "correct; beaten by the best (" + ms_str(best.ms) + ")";
  }
  for (const Candidate& c : space.pruned) {
    CandidateLog log = log_for(c);
    log.status = CandidateStatus::pruned;
    r.log.push_back(std::move(log));
  }
  r.wall_s = since(t0);
  return r;
}

void rethrow_device_fault(const TuneResult& r) {
  if (r.device_fault) std::rethrow_exception(r.device_fault);
}

double full_median_ms(const TuneResult& r, const ops::Config& config) {
  for (const CandidateLog& c : r.log)
    if (is_default_config(c.config, config, r.neutral) && c.median_ms >= 0) return c.median_ms;
  return -1;
}

nlohmann::json to_json(const CandidateLog& c) {
  nlohmann::json j;
  j["config"] = c.config;
  j["status"] = status_name(c.status);
  if (!c.reason.empty()) j["reason"] = c.reason;
  j["smem_bytes_est"] = c.smem_bytes;
  j["acc_regs_est"] = c.acc_regs;
  if (c.registers >= 0) j["registers"] = c.registers;
  if (c.compile_s >= 0) j["compile_s"] = c.compile_s;
  if (c.check_s >= 0) j["check_s"] = c.check_s;
  if (c.measure_s >= 0) j["measure_s"] = c.measure_s;
  if (c.brief_median_ms >= 0) j["brief_median_ms"] = c.brief_median_ms;
  if (c.median_ms >= 0) j["ms_median"] = c.median_ms;
  if (c.iqr_ms >= 0) j["ms_iqr"] = c.iqr_ms;
  return j;
}

nlohmann::json to_json(const TuneResult& r) {
  nlohmann::json j;
  j["found"] = r.found;
  if (r.device_fault) {
    try {
      std::rethrow_exception(r.device_fault);
    } catch (const std::exception& e) {
      j["device_fault"] = reason_text(e);
    }
  }
  if (r.found) {
    j["best"] = {{"config", r.best},
                 {"ms_median", r.best_measurement.median_ms()},
                 {"ms_iqr", r.best_measurement.iqr_ms()},
                 {"runs", r.best_measurement.ms.size()}};
  }
  j["wall_s"] = r.wall_s;
  j["status_counts"] = r.status_counts();
  j["candidates"] = nlohmann::json::array();
  for (const CandidateLog& c : r.log)
    j["candidates"].push_back(to_json(c));
  return j;
}

} // namespace tp::autotune
