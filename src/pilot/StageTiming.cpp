// The measuring stages on the target device: warm latency (ours and the reference, per shape
// and weighted), peak memory against the spec's limit, and the model-level effect. Each runs
// only after correctness passed and only through its backend hook; every number recorded here
// comes from a hook.
#include "pilot/PilotRun.h"

namespace tp::pilot {

namespace {

/// `status` when blocked; runs `body` otherwise.
void gated_stage(PilotRun& r, const std::string& name, const std::string& hook, bool present,
                 const std::function<std::string(nlohmann::json&)>& body) {
  std::string why = r.blocked(name, hook, present);
  r.run_stage(name, [&](nlohmann::json& d) { return why.empty() ? body(d) : why; });
}

} // namespace

nlohmann::json warm_json(const PilotRun& r, const Case& c, const WarmTiming& t) {
  double flops = r.op->flops(c.problem);
  nlohmann::json j = {{"case", c.index},
                      {"label", c.label},
                      {"shape", c.problem.shape_str()},
                      {"dtype", dtype_name(c.problem.dtype)},
                      {"kind", c.representative() ? "representative" : "edge"},
                      {"config", ops::config_str(r.config_for(c))},
                      {"ms_median", t.ms_median},
                      {"ms_iqr", t.ms_iqr},
                      {"ref_name", t.ref_name},
                      {"ref_ms_median", t.ref_ms_median},
                      {"ref_ms_iqr", t.ref_ms_iqr},
                      {"iterations", t.iterations}};
  if (c.representative()) j["weight"] = c.weight();
  // Derived from measured times only: speedup = reference time / our time.
  if (t.ms_median > 0) {
    j["speedup"] = t.ref_ms_median / t.ms_median;
    j["tflops"] = flops / (t.ms_median * 1e-3) / 1e12;
  }
  if (t.ref_ms_median > 0) j["ref_tflops"] = flops / (t.ref_ms_median * 1e-3) / 1e12;
  return j;
}

std::map<int, WarmTiming> best_timings(const PilotRun& r) {
  std::map<int, WarmTiming> best = r.warm;
  for (const auto& [i, w] : r.tuned_warm)
    best[i] = w;
  return best;
}

bool routes_to_kernel(const PilotRun& r, const WarmTiming& t) {
  return r.spec.route != "per_shape" || (t.ms_median > 0 && t.ms_median < t.ref_ms_median);
}

nlohmann::json weighted_summary(const PilotRun& r, const std::map<int, WarmTiming>& t) {
  nlohmann::json out;
  double all_ms = 0, all_ref = 0, all_kernel = 0;
  for (DType dt : r.spec.dtypes) {
    double ms = 0, ref = 0, kernel = 0;
    for (const Case& c : r.cases) {
      if (!c.representative() || c.problem.dtype != dt) continue;
      auto it = t.find(c.index);
      if (it == t.end() || it->second.ms_median <= 0) return nullptr;
      const WarmTiming& w = it->second;
      ms += c.weight() * (routes_to_kernel(r, w) ? w.ms_median : w.ref_ms_median);
      ref += c.weight() * w.ref_ms_median;
      kernel += c.weight() * w.ms_median;
    }
    out["per_dtype"][dtype_name(dt)] = {
        {"weighted_ms", ms}, {"weighted_ref_ms", ref}, {"weighted_speedup", ref / ms}};
    all_ms += ms;
    all_ref += ref;
    all_kernel += kernel;
  }
  // Every dtype counts equally: the spec's weights are over shapes, not dtypes.
  out["weighted_ms"] = all_ms / static_cast<double>(r.spec.dtypes.size());
  out["weighted_ref_ms"] = all_ref / static_cast<double>(r.spec.dtypes.size());
  out["weighted_speedup"] = all_ref / all_ms;
  out["min_speedup"] = r.spec.min_speedup;
  out["route"] = r.spec.route;
  if (r.spec.route == "per_shape") out["kernel_weighted_speedup"] = all_ref / all_kernel;
  return out;
}

void stage_warm(PilotRun& r) {
  const Backends& b = r.opt.backends;
  gated_stage(r, "warm", "warm_timing", bool(b.warm_timing), [&](nlohmann::json& d) {
    d["cases"] = nlohmann::json::array();
    for (const Case& c : r.cases) {
      r.progress.step(c.index + 1, static_cast<int>(r.cases.size()), c.label);
      WarmTiming t = b.warm_timing(*r.op, c.problem, r.config_for(c));
      r.warm[c.index] = t;
      d["cases"].push_back(warm_json(r, c, t));
    }
    d["weighted"] = weighted_summary(r, r.warm);
    return "passed";
  });
}

void stage_memory(PilotRun& r) {
  const Backends& b = r.opt.backends;
  gated_stage(r, "memory", "memory", bool(b.memory), [&](nlohmann::json& d) {
    d["limit_mb"] = r.spec.memory_limit_mb;
    d["cases"] = nlohmann::json::array();
    bool within = true;
    for (const Case& c : r.cases) {
      if (!c.representative()) continue;
      r.progress.step(c.index + 1, static_cast<int>(r.cases.size()), c.label);
      MemoryUsage m = b.memory(*r.op, c.problem, r.config_for(c));
      r.memory[c.index] = m;
      bool ok = m.kernel_peak_mb <= r.spec.memory_limit_mb;
      within = within && ok;
      d["cases"].push_back({{"case", c.index},
                            {"label", c.label},
                            {"kernel_peak_mb", m.kernel_peak_mb},
                            {"reference_peak_mb", m.reference_peak_mb},
                            {"within_limit", ok}});
    }
    return within ? "passed" : "failed";
  });
}

void stage_model(PilotRun& r) {
  const Backends& b = r.opt.backends;
  gated_stage(r, "model", "model_run", bool(b.model_run), [&](nlohmann::json& d) {
    // Routed as the warm stage measured (the model runs before autotuning).
    std::vector<std::pair<ops::Problem, ops::Config>> configs;
    std::vector<ops::Problem> framework;
    for (const Case& c : r.cases) {
      if (!c.representative()) continue;
      auto w = r.warm.find(c.index);
      if (w != r.warm.end() && !routes_to_kernel(r, w->second))
        framework.push_back(c.problem);
      else
        configs.emplace_back(c.problem, r.config_for(c));
    }
    ModelResult m = b.model_run(r.spec.model, *r.op, configs, framework);
    r.model = m;
    d["model"] = m.model.empty() ? r.spec.model.path : m.model;
    d["model_config"] = r.spec.model.config;
    if (!framework.empty()) d["framework_routed"] = framework.size();
    d["baseline_ms"] = m.baseline_ms;
    d["kernel_ms"] = m.kernel_ms;
    d["change_pct"] = m.change_pct;
    d["ci95_pct"] = {m.ci_low_pct, m.ci_high_pct};
    d["op_time_share"] = m.op_time_share;
    d["predicted_change_pct"] = m.predicted_change_pct;
    d["runs"] = m.runs;
    return "passed";
  });
}

} // namespace tp::pilot
