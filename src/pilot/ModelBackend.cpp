// The model stage hook.
#include "pilot/ModelBackend.h"

#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "dispatch/DeviceRun.h"
#include "dispatch/DispatcherImpl.h"
#include "llama/Llama.h"
#include "llama/ModelRun.h"
#include "pilot/Spec.h"
#include "runtime/Driver.h"

namespace tp::pilot {

namespace {

/// How far apart two problems' sizes are: sum of |log(a / b)| over shared shape keys.
double distance(const ops::Problem& a, const ops::Problem& b) {
  double d = 0;
  for (const auto& [k, v] : a.shape) {
    auto it = b.shape.find(k);
    if (it == b.shape.end() || v <= 0 || it->second <= 0)
      d += 100;
    else
      d += std::fabs(std::log(static_cast<double>(v) / static_cast<double>(it->second)));
  }
  return d;
}

bool same_kind(const ops::Problem& a, const ops::Problem& b) {
  if (a.op != b.op || a.dtype != b.dtype || a.options != b.options) return false;
  // Keys that choose a different kernel (a head dim, a mask) are never borrowed across.
  const ops::Operator& op = ops::find_operator(a.op);
  const ops::Problem ta = op.tuning_problem(a), tb = op.tuning_problem(b);
  for (const std::string& k : op.exact_keys())
    if (ta.get(k, -1) != tb.get(k, -1)) return false;
  return true;
}

/// Model settings that are not part of the Llama config.
int take_int(std::map<std::string, std::string>& kv, const char* key, int dflt) {
  auto it = kv.find(key);
  if (it == kv.end()) return dflt;
  int v = 0;
  try {
    v = std::stoi(it->second);
  } catch (const std::exception&) {
    v = -1;
  }
  if (v < 0) user_error() << "model config: " << key << "=" << it->second << " is not a count";
  kv.erase(it);
  return v;
}

} // namespace

std::vector<std::pair<ops::Problem, ops::Config>>
model_pins(const std::vector<std::pair<std::string, ops::Problem>>& model_problems,
           const std::vector<std::pair<ops::Problem, ops::Config>>& piloted,
           const std::vector<ops::Problem>& framework_routed, std::vector<std::string>* notes) {
  std::vector<std::pair<ops::Problem, ops::Config>> out;
  for (const auto& [label, p] : model_problems) {
    const std::pair<ops::Problem, ops::Config>* best = nullptr;
    double best_d = std::numeric_limits<double>::infinity();
    for (const auto& pc : piloted) {
      if (!same_kind(pc.first, p)) continue;
      double d = distance(p, pc.first);
      if (d < best_d) best_d = d, best = &pc;
    }
    const ops::Problem* routed = nullptr;
    for (const auto& f : framework_routed)
      if (same_kind(f, p) && distance(p, f) < best_d) best_d = distance(p, f), routed = &f;
    if (routed) {
      notes->push_back(label + " (" + p.shape_str() + ") runs the fallback in both runs: the " +
                       "pilot measured the framework faster at " + routed->shape_str());
      continue;
    }
    if (!best) {
      notes->push_back(label + " (" + p.shape_str() +
                       "): no piloted problem of its kind; it "
                       "runs the fallback in both runs");
      continue;
    }
    if (best_d > 0)
      notes->push_back(label + " (" + p.shape_str() + ") borrows the config of " +
                       best->first.shape_str());
    out.emplace_back(p, best->second);
  }
  return out;
}

namespace {

/// The spec's model config with the path's mode; a mode in the config must agree with it.
std::map<std::string, std::string> model_settings(const ModelSpec& spec) {
  std::map<std::string, std::string> kv = spec.config;
  const std::string mode = models::mode_of_path(spec.path);
  if (auto it = kv.find("mode"); it != kv.end() && it->second != mode)
    user_error() << "model config: mode=" << it->second << " contradicts path " << spec.path
                 << "; leave mode out (the path sets it)";
  kv["mode"] = mode;
  return kv;
}

} // namespace

void validate_model_spec(const ModelSpec& spec) {
  std::map<std::string, std::string> kv = model_settings(spec);
  take_int(kv, "runs", 10);
  take_int(kv, "warmup", 2);
  models::parse_llama_config(kv, models::LlamaConfig{});
}

void add_model_hook(Backends& b) {
  b.model_run = [](const ModelSpec& spec, const ops::Operator& op,
                   const std::vector<std::pair<ops::Problem, ops::Config>>& configs,
                   const std::vector<ops::Problem>& framework_routed) {
    std::map<std::string, std::string> kv = model_settings(spec);
    const int runs = take_int(kv, "runs", 10), warmup = take_int(kv, "warmup", 2);
    models::LlamaConfig base;
    if (!configs.empty())
      base.dtype = configs.front().first.dtype;
    else if (!framework_routed.empty())
      base.dtype = framework_routed.front().dtype;
    models::ModelRunOptions o;
    o.config = models::parse_llama_config(kv, base);
    std::string why;
    if (!rt::device_info(rt::selected_device_ordinal(), &why))
      throw StageSkipped("the model stage runs on a GPU: " + why);

    // The model's problems of this operator, pinned to the pilot's current configs.
    std::vector<std::pair<std::string, ops::Problem>> mine;
    for (const auto& lp : models::llama_problems(o.config))
      if (lp.second.op == op.name()) mine.push_back(lp);
    std::vector<std::string> notes;
    auto pins = model_pins(mine, configs, framework_routed, &notes);
    for (auto& [problem, config] : pins)
      o.pins[op.name()].push_back({problem, config});
    o.ops = {op.name()};
    o.runs = runs;
    o.warmup = warmup;
    models::ModelRunResult r = models::run_llama(o);
    if (!r.agree)
      throw std::runtime_error(fmt::format(
          "the model's logits disagree between the kernel and the fallback run: {} of {} "
          "outside atol {} + rtol {} (max |err| {:.4g}, rel L2 {:.4g})",
          r.mismatched, r.compared, r.atol, r.rtol, r.max_abs_err, r.rel_l2_err));

    ModelResult m;
    m.model = r.model + " on " + r.device;
    for (const std::string& n : notes)
      m.model += "; " + n;
    m.baseline_ms = r.stats.b_mean;
    m.kernel_ms = r.stats.a_mean;
    m.change_pct = r.stats.change_pct;
    m.ci_low_pct = r.stats.ci_low_pct;
    m.ci_high_pct = r.stats.ci_high_pct;
    double all = 0;
    for (const auto& [label, ms] : r.fallback_ops)
      all += ms;
    const double op_base = models::family_ms(r.fallback_ops, op.name());
    const double op_kernel = models::family_ms(r.kernel_ops, op.name());
    m.op_time_share = all > 0 ? op_base / all : 0;
    // If only the operator's time changes: the model changes by share x (kernel / fallback - 1).
    m.predicted_change_pct = op_base > 0 ? 100.0 * m.op_time_share * (op_kernel / op_base - 1) : 0;
    m.runs = r.stats.runs;
    return m;
  };
}

} // namespace tp::pilot
