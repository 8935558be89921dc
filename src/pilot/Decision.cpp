// The release decision.
//   release                  correctness passed, every metric the spec lists was measured and
//                            passed, the weighted speedup meets min_speedup, memory is within
//                            the limit, and (fallback: required) the fallback passed its test;
//                            with objective.route per_shape the speedup is that of the routed
//                            mix, and at least one representative shape must route to the
//                            kernel;
//   keep framework operator  something was measured and says no (a wrong result, the objective
//                            missed, memory over the limit, a failed fallback);
//   undecided                otherwise: a stage the decision needs did not run (e.g. no GPU).
// Measured "no" wins over "not measured": a missed objective is already an answer.
#include <sstream>

#include "pilot/PilotRun.h"

namespace tp::pilot {

namespace {

std::string fmt(double v) {
  std::ostringstream os;
  os.precision(4);
  os << v;
  return os.str();
}

std::string failure_detail(const StageRecord& s) {
  if (s.data.contains("error")) return ": " + s.data["error"].get<std::string>();
  if (s.name == "memory") {
    std::string over;
    for (const auto& c : s.data.value("cases", nlohmann::json::array()))
      if (!c.value("within_limit", true))
        over += (over.empty() ? "" : "; ") + c.value("label", "") + " peaks at " +
                fmt(c.value("kernel_peak_mb", 0.0)) + " MB";
    return " (limit " + fmt(s.data.value("limit_mb", 0.0)) + " MB): " + over;
  }
  return "";
}

/// objective.route per_shape: which implementation serves each timed case, recorded as
/// d.routes; no representative shape for the kernel is a "no", like a missed objective.
void route_cases(const PilotRun& r, const std::map<int, WarmTiming>& best, nlohmann::json& d,
                 std::vector<std::string>& no, std::vector<std::string>& yes) {
  d["routes"] = nlohmann::json::array();
  std::string kernel_labels;
  int kernel = 0, representative = 0;
  for (const Case& c : r.cases) {
    auto it = best.find(c.index);
    if (it == best.end()) continue;
    const WarmTiming& w = it->second;
    const bool k = routes_to_kernel(r, w);
    d["routes"].push_back({{"case", c.index},
                           {"label", c.label},
                           {"route", k ? "kernel" : "framework"},
                           {"ms_median", w.ms_median},
                           {"ref_ms_median", w.ref_ms_median},
                           {"speedup", w.ms_median > 0 ? w.ref_ms_median / w.ms_median : 0.0}});
    if (k) kernel_labels += (kernel++ ? ", " : "") + c.label;
    if (k && c.representative()) ++representative;
  }
  const int all = static_cast<int>(d["routes"].size());
  const std::string framework = "the framework operator (" + best.begin()->second.ref_name + ")";
  if (kernel == 0)
    no.push_back("route per_shape: " + framework + " is faster at every timed shape (" +
                 std::to_string(all) + "); nothing to pin");
  else if (representative == 0) // edge shapes carry no weight: the routed mix is the framework
    no.push_back("route per_shape: the kernel is faster only at edge shapes (" + kernel_labels +
                 "), which carry no weight; at every representative shape " + framework +
                 " is faster, so the routed mix would change nothing the objective weighs");
  else
    yes.push_back("route per_shape: the kernel serves " + std::to_string(kernel) + " of " +
                  std::to_string(all) + " timed shapes (" + kernel_labels +
                  "), the framework the rest");
}

} // namespace

std::string stage_decision(PilotRun& r) {
  std::string decision;
  r.run_stage("decision", [&](nlohmann::json& d) -> std::string {
    std::vector<std::string> no, missing, yes;
    const StageRecord* corr = r.stage("correctness");
    if (corr->failed() && corr->data.contains("repro")) {
      const nlohmann::json& c = corr->data;
      no.push_back("correctness failed on " + std::to_string(c["summary"].value("failed", 0)) +
                   " of " + std::to_string(c["summary"].value("cases", 0)) +
                   " cases; the cheapest, " + c.value("shrunk_case", "") + ", shrinks to " +
                   c["repro"]["failure"].value("shape", "") +
                   " (reproducer: " + c["repro"].value("dir", "") + ")");
    } else if (corr->failed() && corr->data.value("stage_error", false)) {
      missing.push_back("correctness could not run: " + corr->data.value("error", std::string()));
    } else if (corr->failed()) {
      no.push_back("correctness failed: " + corr->data.value("error", std::string("(no detail)")));
    } else if (corr->passed()) {
      yes.push_back("correctness passed on " + std::to_string(r.cases.size()) + " cases");
    }
    // Every metric the spec lists is needed for a decision, and so is the fallback test when
    // the fallback is required.
    std::vector<std::string> needed;
    for (const auto& m : r.spec.metrics)
      if (m != "correctness") needed.push_back(m);
    if (r.spec.fallback == "required") needed.push_back("fallback");
    for (const auto& name : needed) {
      const StageRecord* s = r.stage(name);
      if (s->failed() && s->data.value("stage_error", false))
        missing.push_back(name + " could not run" + failure_detail(*s));
      else if (s->failed())
        no.push_back(name + " failed" + failure_detail(*s));
      else if (!s->passed())
        missing.push_back(name + ": " + s->status);
      else if (name == "memory")
        yes.push_back("peak memory within " + fmt(r.spec.memory_limit_mb) + " MB");
      else if (name == "fallback")
        yes.push_back("fallback tested on every case");
    }
    // The objective, from the best measured timing of each shape (tuned where adopted).
    std::map<int, WarmTiming> best = best_timings(r);
    nlohmann::json obj = r.warm.empty() ? nlohmann::json() : weighted_summary(r, best);
    if (r.spec.route == "per_shape" && !best.empty()) route_cases(r, best, d, no, yes);
    if (!obj.is_null()) {
      d["objective"] = obj;
      double s = obj["weighted_speedup"].get<double>();
      std::string line =
          "weighted speedup " + fmt(s) + " vs min_speedup " + fmt(r.spec.min_speedup);
      if (obj.contains("kernel_weighted_speedup"))
        line += " (routed per shape; the kernel at every shape: " +
                fmt(obj["kernel_weighted_speedup"].get<double>()) + ")";
      (s >= r.spec.min_speedup ? yes : no)
          .push_back("objective " + std::string(s >= r.spec.min_speedup ? "met" : "missed") + ": " +
                     line);
    } else {
      d["objective"] = "not measured";
      // Warm may have passed without timing every representative shape: still no answer.
      if (r.stage("warm")->passed())
        missing.push_back("objective: not measured (a representative shape has no timing)");
    }
    // The model evidence that motivates (or not) the kernel.
    if (r.model)
      d["model_evidence"] = {{"op_time_share", r.model->op_time_share},
                             {"change_pct", r.model->change_pct},
                             {"predicted_change_pct", r.model->predicted_change_pct}};
    else
      d["model_evidence"] = "not measured: " + r.stage("model")->status;

    decision = !no.empty() ? kKeepFramework : !missing.empty() ? kUndecided : kRelease;
    d["decision"] = decision;
    d["reasons"] = decision == kKeepFramework ? no : decision == kUndecided ? missing : yes;
    d["supporting"] = yes;
    return "passed";
  });
  return decision.empty() ? kUndecided : decision; // empty only if the stage itself threw
}

} // namespace tp::pilot
