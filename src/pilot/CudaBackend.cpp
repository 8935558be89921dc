// The CUDA backend's hooks, as thin adapters over src/perf (measurement), src/autotune (search)
// and ops::check_cuda: each hook first establishes that it can run here, so a missing GPU is a
// `not run` with its reason and never a failure or a number.
#include "pilot/CudaBackend.h"

#include <algorithm>
#include <cstdlib>

#include "autotune/ConfigSpace.h"
#include "autotune/Hooks.h"
#include "autotune/Tuner.h"
#include "ops/CudaCheck.h"
#include "perf/CompileOnly.h"
#include "perf/CompileTiming.h"
#include "perf/FallbackCheck.h"
#include "perf/OursKernel.h"
#include "perf/PeakMemory.h"
#include "perf/SideBySide.h"
#include "runtime/Driver.h"
#include "runtime/Nvrtc.h"
#include "tilepilot/error.h"

namespace tp::pilot {

namespace {

/// The selected GPU, or StageSkipped saying why there is none.
rt::DeviceInfo require_gpu() {
  std::string why;
  std::optional<rt::DeviceInfo> d = rt::device_info(rt::selected_device_ordinal(), &why);
  if (!d) throw StageSkipped("no GPU (" + why + ")");
  return *d;
}

rt::DeviceInfo require_gpu(const std::string& arch) {
  rt::DeviceInfo d = require_gpu();
  if (d.arch != arch)
    throw StageSkipped("GPU " + std::to_string(d.ordinal) + " (" + d.name + ") is " + d.arch +
                       ", not " + arch);
  return d;
}

CompileOnlyResult compile_only(const Kernel& k, const std::string& arch) {
  std::string why;
  if (!rt::nvrtc_available(&why)) throw StageSkipped("NVRTC not found (" + why + ")");
  perf::CompileOnly c = perf::compile_only(k, arch);
  CompileOnlyResult r;
  r.cuda_source = c.cuda_source;
  r.nvrtc_log = c.nvrtc_log;
  r.cubin.assign(c.cubin.begin(), c.cubin.end());
  r.nvrtc_ms = c.nvrtc_ms;
  r.resources = c.resources;
  return r;
}

CompileTiming compile_timing(const ops::Operator& op, const ops::Problem& p, const ops::Config& c,
                             const std::string& arch) {
  require_gpu(arch);
  ops::DeviceArgs dev = perf::upload_args(op, p, 3);
  perf::CompileReport rep = perf::measure_compile(op, p, c, arch, dev.tensors);
  return CompileTiming{rep.cold_phases_ms, rep.cold_ms, rep.warm_ms};
}

WarmTiming warm_timing(const ops::Operator& op, const ops::Problem& p, const ops::Config& c,
                       const CudaBackendOptions& o) {
  require_gpu();
  perf::SideBySideOptions so;
  so.timing.runs = o.warm_runs;
  so.timing.warmup = o.warm_warmup;
  so.check_first = false; // the correctness stage (or the tuner's re-verification) did that
  so.compile_timing = false;
  perf::SideBySide s = perf::time_side_by_side(op, p, c, so);
  if (!s.ref) throw StageSkipped("no framework reference to time against (" + s.ref_note + ")");
  WarmTiming w;
  w.ms_median = s.ours->median_ms;
  w.ms_iqr = s.ours->iqr_ms;
  // A stand-in reference (the unfused one where cuDNN cannot run) is named as such.
  w.ref_name = s.ref_note.empty() ? s.ref_name : s.ref_name + " (" + s.ref_note + ")";
  w.ref_ms_median = s.ref->median_ms;
  w.ref_ms_iqr = s.ref->iqr_ms;
  w.iterations = o.warm_runs;
  return w;
}

MemoryUsage memory(const ops::Operator& op, const ops::Problem& p, const ops::Config& c) {
  require_gpu();
  perf::PeakMemory m = perf::measure_peak_memory(op, p, c);
  return MemoryUsage{m.kernel.peak_mb(), m.reference.peak_mb()};
}

FallbackResult fallback_test(const ops::Operator& op, const ops::Problem& p) {
  require_gpu();
  perf::FallbackCheck f = perf::check_fallback(op, p);
  FallbackResult r;
  r.name = f.note.empty() ? f.name : f.name + " (" + f.note + ")";
  r.passed = f.passed;
  r.max_abs_err = f.max_abs_err;
  return r;
}

TuneResult tune(const ops::Operator& op, const ops::Problem& p, const ops::Config& start,
                const CudaBackendOptions& o) {
  autotune::TuneOptions to;
  // $TILEPILOT_TUNE_BUDGET_S overrides the per-shape search budget (a short GPU session).
  const char* budget = std::getenv("TILEPILOT_TUNE_BUDGET_S");
  to.budget_seconds = o.tune_budget_seconds;
  if (budget && *budget) {
    char* end = nullptr;
    double v = std::strtod(budget, &end);
    if (*end != '\0' || !(v > 0))
      user_error() << "TILEPILOT_TUNE_BUDGET_S='" << budget
                   << "' is not a positive number of seconds; write e.g. 60, or unset it for the "
                   << o.tune_budget_seconds << " s default";
    to.budget_seconds = v;
  }
  rt::DeviceInfo d = require_gpu();
  std::optional<autotune::TuneHooks> hooks = autotune::default_hooks(op, p, d.arch);
  if (!hooks || !hooks->compile) throw StageSkipped("no tuning hooks are registered");
  if (!hooks->measure) throw StageSkipped(hooks->why_no_measure);
  autotune::ConfigSpace space = autotune::enumerate(op, p, autotune::TargetLimits::for_device(d),
                                                    autotune::knob_space(op, d.arch));
  // The search starts from the config the pilot measured so far.
  for (size_t i = 0; i < space.kept.size(); ++i)
    if (space.kept[i].config == start) {
      std::rotate(space.kept.begin(), space.kept.begin() + long(i),
                  space.kept.begin() + long(i) + 1);
      break;
    }
  to.progress = autotune::TuneOptions::Progress::off; // the pilot shows its own progress
  to.label = op.name() + " " + p.shape_str();
  autotune::TuneResult r = autotune::tune(space, *hooks, to);
  autotune::rethrow_device_fault(r); // ends the pilot: its earlier output stays as it was
  if (!r.found) {
    std::string counts;
    for (const auto& [status, n] : r.status_counts())
      counts += (counts.empty() ? "" : ", ") + std::to_string(n) + " " + status;
    throw std::runtime_error("tuning found no correct, measured candidate (" + counts + ")");
  }
  TuneResult t;
  t.best = r.best;
  t.best_ms = r.best_measurement.median_ms();
  for (const autotune::CandidateLog& c : r.log)
    if (c.status != autotune::CandidateStatus::pruned &&
        c.status != autotune::CandidateStatus::skipped)
      ++t.trials;
  return t;
}

} // namespace

void add_cuda_backend(Backends& b, const CudaBackendOptions& o) {
  b.check_cuda = [](const ops::Operator& op, const ops::Problem& p, const ops::CheckOptions& c) {
    require_gpu();
    return ops::check_cuda(op, p, c);
  };
  b.compile_only = compile_only;
  b.compile_timing = compile_timing;
  b.warm_timing = [o](const ops::Operator& op, const ops::Problem& p, const ops::Config& c) {
    return warm_timing(op, p, c, o);
  };
  b.memory = memory;
  b.tune = [o](const ops::Operator& op, const ops::Problem& p, const ops::Config& start) {
    return tune(op, p, start, o);
  };
  b.fallback_test = fallback_test;
}

} // namespace tp::pilot
