// JSON and text for a SideBySide.
#include "perf/SideBySideReport.h"

#include <fmt/format.h>

namespace tp::perf {

namespace {

using nlohmann::json;

json phases_json(const std::vector<std::pair<std::string, double>>& phases) {
  json j = json::object();
  for (const auto& [name, ms] : phases)
    j[name] = ms;
  return j;
}

std::string phases_text(const std::vector<std::pair<std::string, double>>& phases) {
  std::string out;
  for (const auto& [name, ms] : phases)
    out += fmt::format("{}{} {:.1f}", out.empty() ? "" : ", ", name, ms);
  return out;
}

std::string timing_text(const rt::Timing& t, double flops, double bytes) {
  std::string out = fmt::format("{:.4f} ms (IQR {:.4f}), {:.1f} TFLOP/s", t.median_ms, t.iqr_ms,
                                rt::tflops(flops, t.median_ms));
  if (bytes > 0) out += fmt::format(", {:.0f} GB/s", rt::gb_per_s(bytes, t.median_ms));
  return out;
}

} // namespace

json to_json(const SideBySide& s, const ops::Problem& p, const rt::TimingOptions& o) {
  auto timed = [&](const std::optional<rt::Timing>& t, double rt::Timing::*field) {
    return t ? json((*t).*field) : json(nullptr);
  };
  auto tf = [&](const std::optional<rt::Timing>& t) {
    return t ? json(rt::tflops(s.flops, t->median_ms)) : json(nullptr);
  };
  auto gbps = [&](const std::optional<rt::Timing>& t) {
    return t && s.bytes > 0 ? json(rt::gb_per_s(s.bytes, t->median_ms)) : json(nullptr);
  };
  auto speedup = s.speedup();
  json j = {{"op", p.op},
            {"shape", p.shape_str()},
            {"dtype", dtype_name(p.dtype)},
            {"config", ops::config_str(s.config)},
            {"device", s.device},
            {"arch", s.arch},
            {"flops", s.flops},
            {"ms_median", timed(s.ours, &rt::Timing::median_ms)},
            {"ms_iqr", timed(s.ours, &rt::Timing::iqr_ms)},
            {"tflops", tf(s.ours)},
            {"ref_name", s.ref_name},
            {"ref_ms_median", timed(s.ref, &rt::Timing::median_ms)},
            {"ref_ms_iqr", timed(s.ref, &rt::Timing::iqr_ms)},
            {"ref_tflops", tf(s.ref)},
            {"bytes", s.bytes},
            {"gbps", gbps(s.ours)},
            {"ref_gbps", gbps(s.ref)},
            {"copy_gbps", s.copy_gbps ? json(*s.copy_gbps) : json(nullptr)},
            {"speedup", speedup ? json(*speedup) : json(nullptr)},
            {"runs", o.runs},
            {"warmup", o.warmup},
            {"l2_flush_bytes", o.flush_l2 ? json(o.flush_bytes) : json(0)}};
  if (!s.ref_note.empty()) j["ref_note"] = s.ref_note;
  if (s.check) j["check"] = ops::to_json(*s.check);
  if (s.compile)
    j["compile"] = {{"cold_ms", s.compile->cold_ms},
                    {"cold_phases_ms", phases_json(s.compile->cold_phases_ms)},
                    {"cold_registers", s.compile->cold_registers},
                    {"warm_ms", s.compile->warm_ms},
                    {"warm_phases_ms", phases_json(s.compile->warm_phases_ms)},
                    {"warm_cache_hit", s.compile->warm_cache_hit}};
  j["status"] = s.ours ? "measured" : "check_failed";
  return j;
}

std::string to_text(const SideBySide& s, const ops::Problem& p, const rt::TimingOptions& o) {
  std::string out = fmt::format("bench {} {} {} on {} ({}), config {}\n", p.op, p.shape_str(),
                                dtype_name(p.dtype), s.device, s.arch, ops::config_str(s.config));
  if (s.check) {
    const ops::CheckResult& c = *s.check;
    out += fmt::format("  check: {} max_abs_err {:.3g}, rel_l2_err {:.3g} (atol {}, rtol {}), "
                       "{} elements in {}/{} blocks\n",
                       c.passed ? "PASS" : "FAIL", c.max_abs_err, c.rel_l2_err, c.atol, c.rtol,
                       c.checked, c.blocks_run, c.blocks_total);
    if (!c.passed && !c.first_bad.empty()) out += "  first mismatch: " + c.first_bad + "\n";
    if (!c.passed) out += "  not timed: a kernel that fails its check is never timed\n";
  }
  if (s.compile)
    out += fmt::format("  compile: cold {:.1f} ms ({}), warm {:.1f} ms ({}{})\n",
                       s.compile->cold_ms, phases_text(s.compile->cold_phases_ms),
                       s.compile->warm_ms, phases_text(s.compile->warm_phases_ms),
                       s.compile->warm_cache_hit ? "; cache hit" : "; cache miss");
  if (s.ours) out += "  ours: " + timing_text(*s.ours, s.flops, s.bytes) + "\n";
  if (s.ref) out += "  " + s.ref_name + ": " + timing_text(*s.ref, s.flops, s.bytes) + "\n";
  if (!s.ref_note.empty())
    out += "  reference" + (s.ref_name.empty() ? "" : " " + s.ref_name) + ": " + s.ref_note + "\n";
  if (s.copy_gbps && s.bytes > 0) {
    std::string line = fmt::format("  memory: {:.1f} MB (inputs read once, outputs written once); "
                                   "device-to-device copy {:.0f} GB/s in this run",
                                   s.bytes / 1e6, *s.copy_gbps);
    if (s.ours)
      line += fmt::format("; ours {:.0f} % of it",
                          100 * rt::gb_per_s(s.bytes, s.ours->median_ms) / *s.copy_gbps);
    if (s.ref)
      line += fmt::format(", {} {:.0f} %", s.ref_name,
                          100 * rt::gb_per_s(s.bytes, s.ref->median_ms) / *s.copy_gbps);
    out += line + "\n";
  }
  if (auto sp = s.speedup())
    out += fmt::format("  speedup {:.3f}x (reference time / our time; {} runs each after {} "
                       "warm-up, same stream, L2 flushed before every run)\n",
                       *sp, o.runs, o.warmup);
  return out;
}

} // namespace tp::perf
