// Autotuning (only after correctness passed) and the fallback test. A tuned config is adopted
// only after it passes the GPU correctness check; it is then re-timed so that the decision
// compares measured numbers of the config that would ship.
#include "pilot/PilotRun.h"
#include "pilot/Repro.h"

namespace tp::pilot {

void stage_autotune(PilotRun& r) {
  const Backends& b = r.opt.backends;
  std::string why = r.blocked("autotune", "tune", bool(b.tune));
  if (why.empty() && !r.spec.config.empty())
    why = "not run: the spec pins config (" + ops::config_str(r.spec.config) +
          "); remove config from the spec to tune";
  r.run_stage("autotune", [&](nlohmann::json& d) -> std::string {
    if (!why.empty()) return why;
    d["cases"] = nlohmann::json::array();
    bool all_ok = true;
    for (const Case& c : r.cases) {
      if (!c.representative()) continue;
      r.progress.step(c.index + 1, static_cast<int>(r.cases.size()), c.label);
      ops::Config start = r.config_for(c);
      TuneResult t = b.tune(*r.op, c.problem, start);
      nlohmann::json j = {{"case", c.index},
                          {"label", c.label},
                          {"start_config", ops::config_str(start)},
                          {"best_config", ops::config_str(t.best)},
                          {"tuner_best_ms", t.best_ms},
                          {"trials", t.trials}};
      if (!b.check_cuda) {
        j["adopted"] = false;
        j["why_not"] = "no GPU correctness check in this build to verify the tuned config";
        d["cases"].push_back(j);
        continue;
      }
      ReproCase rc;
      rc.problem = c.problem;
      rc.fault = r.spec.inject_fault;
      rc.backend = "cuda";
      rc.arch = r.spec.device;
      rc.config = t.best;
      rc.seed = c.seed;
      rc.atol = r.spec.atol;
      rc.rtol = r.spec.rtol;
      ops::CheckResult check = run_case(rc, b);
      j["verified"] = ops::to_json(check);
      j["adopted"] = check.passed;
      if (!check.passed) {
        all_ok = false;
        d["cases"].push_back(j);
        continue;
      }
      r.tuned[c.index] = t.best;
      if (b.warm_timing) {
        WarmTiming w = b.warm_timing(*r.op, c.problem, t.best);
        r.tuned_warm[c.index] = w;
        j["warm"] = warm_json(r, c, w);
      }
      d["cases"].push_back(j);
    }
    // Shapes without a re-timed tuned config keep their untuned timing in the comparison.
    if (!r.tuned_warm.empty()) {
      std::map<int, WarmTiming> best = r.warm;
      for (const auto& [i, w] : r.tuned_warm)
        best[i] = w;
      d["weighted"] = weighted_summary(r, best);
    }
    return all_ok ? "passed" : "failed";
  });
}

void stage_fallback(PilotRun& r) {
  const Backends& b = r.opt.backends;
  // The fallback does not depend on our kernel, but a pilot that failed correctness stops.
  std::string why = r.blocked("", "fallback_test", bool(b.fallback_test));
  r.run_stage("fallback", [&](nlohmann::json& d) -> std::string {
    d["policy"] = r.spec.fallback;
    if (!why.empty()) return why;
    d["cases"] = nlohmann::json::array();
    bool ok = true;
    for (const Case& c : r.cases) {
      r.progress.step(c.index + 1, static_cast<int>(r.cases.size()), c.label);
      FallbackResult f = b.fallback_test(*r.op, c.problem);
      r.fallback[c.index] = f;
      ok = ok && f.passed;
      d["cases"].push_back({{"case", c.index},
                            {"label", c.label},
                            {"fallback", f.name},
                            {"passed", f.passed},
                            {"max_abs_err", f.max_abs_err}});
    }
    return ok ? "passed" : "failed";
  });
}

} // namespace tp::pilot
