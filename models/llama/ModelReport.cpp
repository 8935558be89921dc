// Model-run results as JSON and as text.
#include <cmath>
#include <fmt/format.h>
#include <set>
#include <sstream>

#include "llama/ModelRun.h"
#include "tilepilot/device.h"

namespace tp::models {

namespace {

nlohmann::json number_or_null(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

double total(const OpTimes& t) {
  double s = 0;
  for (const auto& [k, v] : t)
    s += v;
  return s;
}

std::string decision_text(const ops::DispatchDecision& d) {
  if (d.pinned) return "pinned " + ops::config_str(d.config);
  return std::string("fallback (") + ops::fallback_reason_name(d.reason) + "): " + d.why;
}

} // namespace

nlohmann::json to_json(const ModelRunResult& r) {
  nlohmann::json j;
  j["model"] = r.model;
  j["device"] = r.device;
  j["timer"] = r.on_device ? "CUDA events" : "wall clock";
  j["routes"] = nlohmann::json::array();
  for (const ModelRoute& m : r.routes) {
    nlohmann::json e = {{"label", m.label},
                        {"op", m.problem.op},
                        {"shape", m.problem.shape_str()},
                        {"dtype", dtype_name(m.problem.dtype)},
                        {"path", m.decision.pinned ? "pinned" : "fallback"}};
    if (m.decision.pinned) {
      e["config"] = ops::config_str(m.decision.config);
    } else {
      e["reason"] = ops::fallback_reason_name(m.decision.reason);
      e["why"] = m.decision.why;
    }
    j["routes"].push_back(e);
  }
  j["runs"] = r.stats.runs;
  j["kernel_ms"] = r.kernel_ms;
  j["fallback_ms"] = r.fallback_ms;
  j["kernel_ms_mean"] = r.stats.a_mean;
  j["fallback_ms_mean"] = r.stats.b_mean;
  j["change_pct"] = number_or_null(r.stats.change_pct);
  j["ci95_pct"] = {number_or_null(r.stats.ci_low_pct), number_or_null(r.stats.ci_high_pct)};
  for (auto [name, prof] : {std::pair{"kernel", &r.kernel_ops}, {"fallback", &r.fallback_ops}}) {
    nlohmann::json ops = nlohmann::json::object();
    const double all = total(*prof);
    for (const auto& [label, ms] : *prof)
      ops[label] = {{"ms", ms}, {"share", all > 0 ? ms / all : 0.0}};
    j["profile"][name] = {{"total_ms", all}, {"ops", ops}};
  }
  for (auto [name, prof] : {std::pair{"kernel", &r.kernel_ops}, {"fallback", &r.fallback_ops}}) {
    Bottleneck b = bottleneck(*prof);
    j["bottleneck"][name] = {{"family", b.family}, {"ms", b.ms}, {"share", b.share}};
  }
  j["memory"] = {{"weight_bytes", r.weight_bytes},
                 {"activation_bytes", r.activation_bytes},
                 {"kv_cache_bytes", r.cache_bytes},
                 {"kernel_peak_bytes", r.kernel_peak_bytes},
                 {"process_peak_bytes", r.process_peak_bytes}};
  j["agreement"] = {{"max_abs_err", r.max_abs_err},
                    {"rel_l2_err", r.rel_l2_err},
                    {"atol", r.atol},
                    {"rtol", r.rtol},
                    {"compared", r.compared},
                    {"mismatched", r.mismatched},
                    {"agree", r.agree}};
  j["dispatch"] = {{"kernel", r.kernel_dispatch}, {"fallback", r.fallback_dispatch}};
  return j;
}

std::string to_text(const ModelRunResult& r) {
  std::string s = fmt::format("model:   {}\ndevice:  {}\n", r.model, r.device);
  s += "kernel run dispatch:\n";
  for (const ModelRoute& m : r.routes)
    s += fmt::format("  {:<16} {:<44} {}\n", m.label, m.problem.shape_str(),
                     decision_text(m.decision));
  const PairedStats& st = r.stats;
  s += fmt::format("latency: {} interleaved runs ({}): kernel {:.3f} ms, fallback {:.3f} ms, "
                   "change {:+.2f}%",
                   st.runs, r.on_device ? "CUDA events" : "wall clock", st.a_mean, st.b_mean,
                   st.change_pct);
  if (std::isfinite(st.ci_low_pct))
    s += fmt::format(" (95% CI {:+.2f}% .. {:+.2f}%)", st.ci_low_pct, st.ci_high_pct);
  s += "\ntime by operator (one profiled forward each):\n";
  s += fmt::format("  {:<16} {:>11} {:>7} {:>12} {:>7}\n", "operator", "kernel ms", "share",
                   "fallback ms", "share");
  std::set<std::string> labels;
  for (const auto& [k, v] : r.kernel_ops)
    labels.insert(k);
  for (const auto& [k, v] : r.fallback_ops)
    labels.insert(k);
  const double tk = total(r.kernel_ops), tf = total(r.fallback_ops);
  for (const std::string& l : labels) {
    double k = r.kernel_ops.count(l) ? r.kernel_ops.at(l) : 0;
    double f = r.fallback_ops.count(l) ? r.fallback_ops.at(l) : 0;
    s += fmt::format("  {:<16} {:>11.3f} {:>6.1f}% {:>12.3f} {:>6.1f}%\n", l, k,
                     tk > 0 ? 100 * k / tk : 0.0, f, tf > 0 ? 100 * f / tf : 0.0);
  }
  s += fmt::format("  {:<16} {:>11.3f} {:>7} {:>12.3f}\n", "total", tk, "", tf);
  const Bottleneck bk = bottleneck(r.kernel_ops), bf = bottleneck(r.fallback_ops);
  s += fmt::format("bottleneck: {} ({:.1f}% of the kernel run; fallback run: {} {:.1f}%)\n",
                   bk.family.empty() ? "none" : bk.family, 100 * bk.share,
                   bf.family.empty() ? "none" : bf.family, 100 * bf.share);
  s += fmt::format("memory:  weights {}, activations {}", format_bytes(r.weight_bytes),
                   format_bytes(r.activation_bytes));
  if (r.cache_bytes) s += fmt::format(", KV caches {}", format_bytes(r.cache_bytes));
  if (r.on_device)
    s += fmt::format("; device peak over baseline: kernel path {}, process {}",
                     format_bytes(r.kernel_peak_bytes), format_bytes(r.process_peak_bytes));
  s += fmt::format("\nagreement: logits max |err| {:.4g}, rel L2 {:.4g}; {} of {} outside "
                   "atol {} + rtol {} -> {}\n",
                   r.max_abs_err, r.rel_l2_err, r.mismatched, r.compared, r.atol, r.rtol,
                   r.agree ? "agree" : "DISAGREE");
  s += "dispatch counters (one profiled forward each):\n";
  for (auto [name, text] :
       {std::pair{"kernel run", &r.kernel_dispatch}, {"fallback run", &r.fallback_dispatch}}) {
    std::istringstream lines(*text);
    for (std::string line; std::getline(lines, line);)
      s += fmt::format("  {:<13} {}\n", name, line);
  }
  return s;
}

} // namespace tp::models
