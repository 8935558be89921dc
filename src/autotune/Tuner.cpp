// The tuner's search loop: compile ahead on the pool, then per candidate in order: post-compile
// checks, a brief timing for early stop, the full timing, and a correctness check for any
// candidate that would become the best.
#include "autotune/Tuner.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>
#include <thread>

#include "autotune/CompilePool.h"
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

// Runs a check/measure hook, turning an exception into a run_failed record. A DeviceFault is
// not one candidate's problem: the context is lost, so tune() stops the search (it propagates).
template <typename F>
bool guarded(CandidateLog& log, const char* what, F&& f) {
  try {
    f();
    return true;
  } catch (const DeviceFault&) {
    throw;
  } catch (const std::exception& e) {
    log.status = CandidateStatus::run_failed;
    log.reason = std::string(what) + " threw: " + e.what();
  } catch (...) {
    log.status = CandidateStatus::run_failed;
    log.reason = std::string(what) + " threw a non-standard exception";
  }
  return false;
}

struct Best {
  size_t index = std::numeric_limits<size_t>::max();
  double ms = std::numeric_limits<double>::infinity();
  Measurement measurement;
  bool found() const { return index != std::numeric_limits<size_t>::max(); }
};

// Brief timing, early stop, full timing, and the check of a would-be best. Fills `log`; updates
// `best` when the candidate wins so far.
void measure_candidate(const TuneHooks& hooks, const TuneOptions& o, size_t index,
                       const CompiledCandidate& cc, CandidateLog& log, Best& best) {
  const ops::Config& cfg = log.config;
  auto t0 = Clock::now();
  Measurement brief, full;
  if (!guarded(log, "measure", [&] { brief = hooks.measure(cfg, cc, o.brief_iters); })) return;
  log.brief_median_ms = brief.median_ms();
  if (!std::isfinite(log.brief_median_ms) || log.brief_median_ms < 0) {
    log.status = CandidateStatus::run_failed;
    log.reason = "measure returned no valid samples";
    return;
  }
  if (since(t0) > o.per_config_seconds) {
    log.measure_s = since(t0);
    log.status = CandidateStatus::timed_out;
    log.reason = "brief measurement took " + std::to_string(log.measure_s) + " s > limit " +
                 std::to_string(o.per_config_seconds) + " s";
    return;
  }
  if (best.found() && log.brief_median_ms > o.early_stop_ratio * best.ms) {
    log.measure_s = since(t0);
    log.status = CandidateStatus::early_stopped;
    std::ostringstream why;
    why << "brief median " << ms_str(log.brief_median_ms) << " over " << brief.ms.size()
        << " runs > " << o.early_stop_ratio << " x best " << ms_str(best.ms);
    log.reason = why.str();
    return;
  }
  if (!guarded(log, "measure", [&] { full = hooks.measure(cfg, cc, o.full_iters); })) return;
  log.measure_s = since(t0);
  log.median_ms = full.median_ms();
  log.iqr_ms = full.iqr_ms();
  if (!std::isfinite(log.median_ms) || log.median_ms < 0) {
    log.status = CandidateStatus::run_failed;
    log.reason = "measure returned no valid samples";
    return;
  }
  if (log.measure_s > o.per_config_seconds) {
    log.status = CandidateStatus::timed_out;
    log.reason = "measurement took " + std::to_string(log.measure_s) + " s > limit " +
                 std::to_string(o.per_config_seconds) + " s";
    return;
  }
  log.status = CandidateStatus::measured;
  if (best.found() && log.median_ms >= best.ms) {
    log.reason = "median " + ms_str(log.median_ms) + " >= best " + ms_str(best.ms) +
                 "; not checked (cannot win)";
    return;
  }
  // Only a checked candidate may become the best, so a fast wrong kernel never wins.
  if (!hooks.check_correct) {
    log.status = CandidateStatus::incorrect;
    log.reason = "no check_correct hook: an unchecked candidate cannot win";
    return;
  }
  auto c0 = Clock::now();
  bool ok = false;
  std::string why;
  if (!guarded(log, "check_correct", [&] { ok = hooks.check_correct(cfg, cc, &why); })) return;
  log.check_s = since(c0);
  if (!ok) {
    log.status = CandidateStatus::incorrect;
    log.reason = why.empty() ? "check_correct failed" : why;
    return;
  }
  log.reason = "correct";
  best.index = index;
  best.ms = log.median_ms;
  best.measurement = std::move(full);
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

TuneResult tune(const ConfigSpace& space, const TuneHooks& hooks, const TuneOptions& o) {
  if (!hooks.compile)
    user_error() << "tune: no compile hook; the CUDA backend provides one through "
                    "tp::autotune::set_default_hooks, or pass TuneHooks explicitly";
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
    // Compile-only runs may race ahead freely; with measurement, a few configs per thread ahead
    // keep the GPU fed without holding hundreds of loaded modules.
    size_t window = hooks.measure ? static_cast<size_t>(4 * threads) : n;
    CompilePool pool(hooks.compile, std::move(configs), threads, window, o.per_config_seconds);
    bool draw =
        o.progress == TuneOptions::Progress::on ||
        (o.progress == TuneOptions::Progress::automatic && ProgressBar::stderr_is_terminal());
    ProgressBar bar(draw, o.label.empty() ? "tune" : o.label, n);
    bar.update(0, "");
    for (size_t i = 0; i < n; ++i) {
      CandidateLog log = log_for(space.kept[i]);
      if (r.device_fault) {
        // Every GPU call fails once the context is lost; measuring on would fail each later
        // candidate with the same error, so they are skipped with the cause instead.
        log.status = CandidateStatus::skipped;
        log.reason = "not measured: the GPU context was lost when " + faulted + " faulted";
        r.log.push_back(std::move(log));
        continue;
      }
      if (o.budget_seconds > 0 && since(t0) > o.budget_seconds) {
        log.status = CandidateStatus::skipped;
        log.reason = "budget of " + std::to_string(o.budget_seconds) + " s spent";
        r.log.push_back(std::move(log));
        continue;
      }
      CompilePool::Outcome out = pool.wait(i);
      log.compile_s = out.seconds;
      using Kind = CompilePool::Outcome::Kind;
      if (out.kind == Kind::timed_out) {
        log.status = CandidateStatus::timed_out;
        log.reason =
            "compile took longer than the limit of " + std::to_string(o.per_config_seconds) + " s";
      } else if (out.kind == Kind::user_error) {
        log.status = CandidateStatus::verify_failed;
        log.reason = out.error;
      } else if (out.kind == Kind::error) {
        log.status = CandidateStatus::compile_failed;
        log.reason = out.error;
      } else if (log.registers = out.compiled.usage.registers;
                 !post_compile_reject(out.compiled.usage).empty()) {
        log.status = CandidateStatus::spills;
        log.reason = post_compile_reject(out.compiled.usage);
      } else if (!hooks.measure) {
        log.status = CandidateStatus::compiled;
        log.reason = hooks.why_no_measure.empty() ? "compile only: no measure hook"
                                                  : "compile only: " + hooks.why_no_measure;
      } else {
        try {
          measure_candidate(hooks, o, i, out.compiled, log, best);
        } catch (const DeviceFault& e) {
          log.status = CandidateStatus::run_failed;
          log.reason = "the GPU faulted running this config: " + reason_text(e);
          r.device_fault = std::current_exception();
          faulted = ops::config_str(log.config);
        }
      }
      r.log.push_back(std::move(log));
      bar.update(i + 1, best.found() ? "best " + ms_str(best.ms) + " " +
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
