#include "TuneSpec.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "TuneShared.h"
#include "autotune/Policy.h"
#include "autotune/ShapeTuning.h"
#include "pilot/Spec.h"
#include "release/Files.h"
#include "tilepilot/error.h"

namespace tp::cli {

namespace {

using namespace tp::autotune;
using Clock = std::chrono::steady_clock;

struct Shape {
  std::string label; // "rep0 bf16", "edge3 bf16"
  const pilot::ShapeEntry* entry;
  ops::Problem problem;
};

std::vector<Shape> shapes_of(const pilot::PilotSpec& s) {
  std::vector<Shape> out;
  for (DType dt : s.dtypes) {
    int i = 0;
    for (const auto& e : s.representative)
      out.push_back({"rep" + std::to_string(i++) + " " + dtype_name(dt), &e, e.problem(s.op, dt)});
    i = 0;
    for (const auto& e : s.edge)
      out.push_back({"edge" + std::to_string(i++) + " " + dtype_name(dt), &e, e.problem(s.op, dt)});
  }
  return out;
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// The pruned space of one shape: the operator's knobs for the spec's arch, narrowed by --space.
ConfigSpace space_for(const TuneSpecArgs& a, const ops::Operator& op, const ops::Problem& p,
                      const std::string& arch, const TargetLimits& limits) {
  std::vector<ops::Knob> knobs = knob_space(op, arch);
  if (!a.space.empty()) knobs = restrict_space(knobs, a.space);
  return enumerate(op, p, limits, knobs);
}

// Tunes one shape and, when the winner is not the baseline, times the two side by side.
nlohmann::json tune_shape(const TuneSpecArgs& a, const ops::Operator& op, const Shape& sh,
                          const pilot::PilotSpec& spec, const rt::DeviceInfo& dev,
                          const std::string& progress_label, PinnedTable& pinned) {
  const auto t0 = Clock::now();
  const ops::Problem& p = sh.problem;
  const ops::Config baseline = pilot::pinned_config(op, p, spec.device, spec.config);
  nlohmann::json j = {{"label", sh.label},
                      {"shape", p.shape_str()},
                      {"representative", sh.entry->representative},
                      {"weight", sh.entry->weight},
                      {"default_config", baseline}};
  ConfigSpace space = space_for(a, op, p, spec.device, TargetLimits::for_device(dev));
  j["space"] = {{"total", space.total()}, {"kept", space.kept.size()}};
  std::optional<TuneHooks> hooks = default_hooks(op, p, spec.device);
  if (!hooks || !hooks->measure)
    user_error() << "tune --spec: this build has no GPU tuning backend ("
                 << (hooks ? hooks->why_no_measure : "no hooks registered") << ")";
  TuneOptions o;
  o.budget_seconds = a.budget_per_shape;
  o.per_config_seconds = a.config_timeout;
  o.label = progress_label;
  o.progress = a.json ? TuneOptions::Progress::off : TuneOptions::Progress::automatic;
  const ShapeTuning t = tune_against_baseline(space, *hooks, baseline, o);
  const TuneResult& r = t.search;
  // A fault ends the run here: the pinned table is not written (the earlier one stays), and
  // entries stored for earlier shapes were measured and checked before it.
  rethrow_device_fault(r);
  j["status"] = outcome_name(t.outcome);
  j["search"] = {{"wall_s", r.wall_s}, {"status_counts", r.status_counts()}};
  // Every candidate that got past pruning, with its timings: where the budget went.
  j["search"]["candidates"] = nlohmann::json::array();
  for (const CandidateLog& c : r.log)
    if (c.status != CandidateStatus::pruned) j["search"]["candidates"].push_back(to_json(c));
  if (r.found) {
    j["best_config"] = r.best;
    j["search"]["best_ms"] = r.best_measurement.median_ms();
    j["search"]["default_ms"] = full_median_ms(r, baseline);
    if (!a.no_store) j["stored"] = store_winner(p, dev, r, baseline, "tilepilot tune --spec");
  }
  if (t.outcome == ShapeTuning::Outcome::compare_failed) j["error"] = t.error;
  if (t.outcome == ShapeTuning::Outcome::baseline_best ||
      t.outcome == ShapeTuning::Outcome::compared) {
    j["default_ms"] = t.baseline_ms();
    j["tuned_ms"] = t.tuned_ms();
    j["speedup"] = t.speedup();
  }
  if (t.comparison) {
    j["default_iqr_ms"] = t.comparison->baseline.iqr_ms();
    j["tuned_iqr_ms"] = t.comparison->candidate.iqr_ms();
    j["samples_each"] = t.comparison->baseline.ms.size();
    if (t.speedup() >= 1 + a.min_gain) pinned.add(make_key(p, dev), r.best);
  }
  j["wall_s"] = std::chrono::duration<double>(Clock::now() - t0).count();
  return j;
}

void print_row(const nlohmann::json& s) {
  std::cout << "  " << s["label"].get<std::string>() << "  " << s["shape"].get<std::string>()
            << "\n    ";
  const std::string st = s["status"];
  if (st == "no_candidate" || st == "compare_failed") {
    std::cout << st << (s.contains("error") ? ": " + s["error"].get<std::string>() : "") << "\n";
    return;
  }
  std::cout << "default " << fmt("%.4f", s["default_ms"]) << " ms, tuned "
            << fmt("%.4f", s["tuned_ms"]) << " ms, x" << fmt("%.3f", s["speedup"]) << " in "
            << fmt("%.1f", s["wall_s"]) << " s"
            << (st == "default_best" ? " (the default was the best)"
                                     : " [" + ops::config_str(s["best_config"]) + "]")
            << "\n";
}

} // namespace

void run_tune_spec(const TuneSpecArgs& a, int* rc) {
  if (!(a.budget_per_shape > 0))
    user_error() << "tune --spec: --budget-seconds must be > 0 (seconds per shape), got "
                 << a.budget_per_shape;
  const pilot::PilotSpec spec = pilot::load_spec(a.spec);
  const ops::Operator& op = ops::find_operator(spec.op);
  const std::vector<Shape> shapes = shapes_of(spec);

  std::string no_gpu;
  std::optional<rt::DeviceInfo> dev = rt::device_info(0, &no_gpu);
  const bool on_device = dev && dev->arch == spec.device;
  nlohmann::json j = {{"spec", a.spec},
                      {"op", op.name()},
                      {"arch", spec.device},
                      {"device", on_device ? dev->name : "none"},
                      {"budget_seconds_per_shape", a.budget_per_shape},
                      {"min_gain", a.min_gain}};
  if (a.dry_run || !on_device) {
    const TargetLimits limits =
        on_device ? TargetLimits::for_device(*dev) : TargetLimits::for_arch(spec.device);
    j["shapes"] = nlohmann::json::array();
    for (const Shape& sh : shapes) {
      ConfigSpace space = space_for(a, op, sh.problem, spec.device, limits);
      j["shapes"].push_back({{"label", sh.label},
                             {"shape", sh.problem.shape_str()},
                             {"space", {{"total", space.total()}, {"kept", space.kept.size()}}}});
      if (!a.json)
        std::cout << sh.label << "  " << sh.problem.shape_str() << ": " << space.kept.size()
                  << " of " << space.total() << " configs kept after pruning\n";
    }
    std::string why;
    if (!a.dry_run)
      why = "not run: tuning needs an " + spec.device + " GPU (" +
            (dev ? "GPU 0 is " + dev->name + ", " + dev->arch : no_gpu) + ")";
    j["status"] = a.dry_run ? "dry_run" : "not_run";
    if (!why.empty()) j["reason"] = why;
    if (a.json)
      std::cout << j.dump(2) << "\n";
    else if (!why.empty())
      std::cout << why << "\n";
    *rc = a.dry_run ? 0 : 2;
    return;
  }

  const auto t0 = Clock::now();
  PinnedTable pinned;
  j["shapes"] = nlohmann::json::array();
  if (!a.json)
    std::cout << "tune --spec " << a.spec << ": " << shapes.size() << " shapes of " << op.name()
              << " on " << dev->name << ", " << a.budget_per_shape << " s each\n";
  bool all_ok = true;
  double w_default = 0, w_tuned = 0, w_sum = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::string label =
        "[" + std::to_string(i + 1) + "/" + std::to_string(shapes.size()) + "] " + shapes[i].label;
    nlohmann::json s = tune_shape(a, op, shapes[i], spec, *dev, label, pinned);
    const std::string st = s["status"];
    all_ok = all_ok && (st == "compared" || st == "default_best");
    if (s.contains("speedup") && shapes[i].entry->representative) {
      w_default += shapes[i].entry->weight * s["default_ms"].get<double>();
      w_tuned += shapes[i].entry->weight * s["tuned_ms"].get<double>();
      w_sum += shapes[i].entry->weight;
    }
    if (!a.json) print_row(s);
    j["shapes"].push_back(std::move(s));
  }
  j["wall_s"] = std::chrono::duration<double>(Clock::now() - t0).count();
  if (w_sum > 0)
    j["representative_weighted"] = {{"default_ms", w_default / w_sum},
                                    {"tuned_ms", w_tuned / w_sum},
                                    {"speedup", w_default / w_tuned}};
  j["pinned"] = pinned.to_json();
  // Through a temporary file and a rename: a tune killed while writing leaves the earlier
  // table whole.
  if (!a.pinned_out.empty()) release::write_text(a.pinned_out, pinned.to_json().dump(2) + "\n");
  j["status"] = all_ok ? "tuned" : "incomplete";
  if (a.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "total " << fmt("%.1f", j["wall_s"]) << " s";
    if (w_sum > 0)
      std::cout << "; representative shapes, weighted: default " << fmt("%.4f", w_default / w_sum)
                << " ms, tuned " << fmt("%.4f", w_tuned / w_sum) << " ms, x"
                << fmt("%.3f", w_default / w_tuned);
    std::cout << "\n"
              << pinned.size() << " winner(s) at least " << fmt("%.0f", a.min_gain * 100)
              << " % faster than the default"
              << (a.pinned_out.empty() ? "" : ", written to " + a.pinned_out) << "\n";
  }
  *rc = all_ok ? 0 : 1;
}

} // namespace tp::cli
