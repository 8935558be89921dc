// report.json assembly and the report's sections (shared by the Markdown and HTML renderers).
// A section of a stage that did not run shows its `not run: <reason>` line and no table.
#include <cmath>
#include <cstdio>
#include <sstream>

#include "pilot/PilotRun.h"
#include "pilot/Report.h"

namespace tp::pilot {

namespace {

using json = nlohmann::json;

std::string str(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number()) return num(v);
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  return v.dump();
}

const json* find_stage(const json& report, const std::string& name) {
  for (const auto& s : report["stages"])
    if (s.value("name", "") == name) return &s;
  return nullptr;
}

/// A section for stage `name`: the status line, then `fill` when the stage has data to show.
Section stage_section(const json& report, const std::string& name, const std::string& title,
                      const std::function<void(const json& data, Section&)>& fill) {
  Section s;
  s.title = title;
  const json* st = find_stage(report, name);
  if (!st) {
    s.lines.push_back("not run: stage missing from the report");
    return s;
  }
  std::string status = st->value("status", "");
  s.lines.push_back("Status: " + status);
  if (st->at("data").contains("error"))
    s.lines.push_back("Error: " + st->at("data")["error"].get<std::string>());
  if (status == "passed" || status == "failed") fill(st->at("data"), s);
  return s;
}

std::string seconds(const json& v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v.is_number() ? v.get<double>() : 0.0);
  return buf;
}

std::string ms_iqr(const json& c, const char* m, const char* iqr) {
  return num(c.value(m, json())) + " ± " + num(c.value(iqr, json()));
}

} // namespace

std::string num(const json& v) {
  if (!v.is_number()) return "-";
  double x = v.get<double>();
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  std::ostringstream os;
  os.precision(4);
  os << x;
  return os.str();
}

json build_report(const PilotRun& r, const std::string& decision) {
  json j;
  j["format"] = kReportFormat;
  j["spec"] = to_json(r.spec);
  const StageRecord* env = r.stage("environment");
  j["environment"] = env ? env->data : json::object();
  j["environment"].erase("spec"); // echoed once, under "spec"
  j["stages"] = json::array();
  for (const auto& s : r.stages)
    j["stages"].push_back({{"name", s.name},
                           {"status", s.status},
                           {"started", s.started},
                           {"finished", s.finished},
                           {"seconds", s.seconds},
                           {"data", s.data}});
  const StageRecord* d = r.stage("decision");
  j["decision"] = d ? d->data : json{{"decision", decision}};
  j["decision"]["decision"] = decision;
  j["out_dir"] = r.opt.out_dir;
  return j;
}

std::vector<Section> report_sections(const json& report) {
  std::vector<Section> out;
  const json& env = report["environment"];
  Section e{"Environment", {}, {"item", "value"}, {}};
  const json& ev = env.value("environment", json::object());
  for (const char* k : {"tilepilot_version", "git_commit", "host_compiler", "os", "cuda_toolkit",
                        "nvrtc", "driver", "gpu_note", "cublaslt", "cudnn"})
    if (ev.contains(k) && !str(ev[k]).empty()) e.rows.push_back({k, str(ev[k])});
  for (const auto& g : ev.value("gpus", json::array()))
    e.rows.push_back({"gpu", str(g.value("name", json())) + " (" + str(g.value("arch", json())) +
                                 ", " + str(g.value("sm_count", json())) + " SMs)"});
  const json& td = env.value("target_device", json::object());
  e.rows.push_back(
      {"target device",
       str(td.value("arch", json())) +
           (td.value("present", false) ? ": present" : ": " + str(td.value("reason", json())))});
  out.push_back(e);

  Section st{"Stages", {}, {"stage", "status", "seconds"}, {}};
  for (const auto& s : report["stages"])
    st.rows.push_back({s.value("name", ""), s.value("status", ""), seconds(s["seconds"])});
  out.push_back(st);

  out.push_back(stage_section(report, "correctness", "Correctness", [](const json& d, Section& s) {
    s.lines.push_back("Backend: " + str(d.value("backend", json())) +
                      (d.contains("backend_note") ? " (" + str(d["backend_note"]) + ")" : ""));
    if (d.contains("inject_fault")) s.lines.push_back("Fault injected: " + str(d["inject_fault"]));
    s.header = {"case", "kind",   "dtype",       "shape",      "mask",  "weight",
                "seed", "blocks", "max_abs_err", "rel_l2_err", "passed"};
    for (const auto& c : d.value("cases", json::array()))
      s.rows.push_back({str(c["case"]), str(c["kind"]), str(c["dtype"]), str(c["shape"]),
                        str(c["mask"]), str(c.value("weight", json())), str(c["seed"]),
                        str(c["blocks"]), str(c["max_abs_err"]), str(c["rel_l2_err"]),
                        c.value("passed", false) ? "yes" : "**no**"});
    if (d.contains("shrink"))
      s.lines.push_back("Shrunk the failing case from " + str(d["shrink"]["from"]) + " to " +
                        str(d["shrink"]["to"]) + " in " + str(d["shrink"]["attempts"]) +
                        " checks.");
    if (d.contains("repro"))
      s.lines.push_back("Reproducer: " + str(d["repro"]["dir"]) + " (replay: `" +
                        str(d["repro"]["command"]) + "`)");
  }));

  out.push_back(stage_section(report, "compile", "Compile", [](const json& d, Section& s) {
    s.lines.push_back("Mode: " + str(d.value("mode", json())) + " for " +
                      str(d.value("arch", json())));
    if (d.contains("cold_warm")) s.lines.push_back("Cold/warm compile: " + str(d["cold_warm"]));
    s.header = {"kernel", "config", "cases", "cold ms", "warm ms", "NVRTC ms", "resources"};
    for (const auto& k : d.value("kernels", json::array()))
      s.rows.push_back({str(k["kernel"]), str(k["config"]), std::to_string(k["cases"].size()),
                        str(k.value("cold_ms", json())), str(k.value("warm_ms", json())),
                        str(k.value("nvrtc_ms", json())),
                        k.contains("resources") ? k["resources"].dump() : "-"});
  }));

  out.push_back(stage_section(report, "warm", "Warm latency", [](const json& d, Section& s) {
    s.header = {"shape",     "dtype",          "weight",  "ours ms (± IQR)",
                "reference", "ref ms (± IQR)", "speedup", "TFLOP/s"};
    for (const auto& c : d.value("cases", json::array()))
      s.rows.push_back({str(c["shape"]), str(c["dtype"]), str(c.value("weight", json())),
                        ms_iqr(c, "ms_median", "ms_iqr"), str(c["ref_name"]),
                        ms_iqr(c, "ref_ms_median", "ref_ms_iqr"), str(c.value("speedup", json())),
                        str(c.value("tflops", json()))});
    if (d["weighted"].is_object())
      s.lines.push_back("Weighted speedup: " + num(d["weighted"]["weighted_speedup"]) +
                        " (objective: at least " + num(d["weighted"]["min_speedup"]) + ")");
  }));

  out.push_back(stage_section(report, "memory", "Peak memory", [](const json& d, Section& s) {
    s.lines.push_back("Limit: " + num(d.value("limit_mb", json())) + " MB");
    s.header = {"case", "kernel peak MB", "reference peak MB", "within limit"};
    for (const auto& c : d.value("cases", json::array()))
      s.rows.push_back({str(c["label"]), str(c["kernel_peak_mb"]), str(c["reference_peak_mb"]),
                        str(c["within_limit"])});
  }));

  out.push_back(stage_section(report, "model", "Model level", [](const json& d, Section& s) {
    s.header = {"model",    "baseline ms",   "with kernel ms",     "change %",
                "95% CI %", "op time share", "predicted change %", "runs"};
    s.rows.push_back({str(d["model"]), str(d["baseline_ms"]), str(d["kernel_ms"]),
                      str(d["change_pct"]),
                      "[" + num(d["ci95_pct"][0]) + ", " + num(d["ci95_pct"][1]) + "]",
                      str(d["op_time_share"]), str(d["predicted_change_pct"]), str(d["runs"])});
  }));

  out.push_back(stage_section(report, "autotune", "Autotune", [](const json& d, Section& s) {
    s.header = {"case", "start config", "best config", "tuner ms", "trials", "adopted"};
    for (const auto& c : d.value("cases", json::array()))
      s.rows.push_back({str(c["label"]), str(c["start_config"]), str(c["best_config"]),
                        str(c["tuner_best_ms"]), str(c["trials"]), str(c["adopted"])});
  }));

  out.push_back(stage_section(report, "fallback", "Fallback", [](const json& d, Section& s) {
    s.header = {"case", "fallback", "passed", "max_abs_err"};
    for (const auto& c : d.value("cases", json::array()))
      s.rows.push_back(
          {str(c["label"]), str(c["fallback"]), str(c["passed"]), str(c["max_abs_err"])});
  }));

  const json& dec = report["decision"];
  Section ds{"Decision", {"**" + str(dec.value("decision", json())) + "**"}, {}, {}};
  for (const auto& r : dec.value("reasons", json::array()))
    ds.lines.push_back("- " + str(r));
  if (dec.contains("model_evidence"))
    ds.lines.push_back("Model evidence: " + str(dec["model_evidence"]));
  if (dec.contains("routes")) { // objective.route per_shape: who serves each tested shape
    ds.header = {"case", "served by", "ours ms", "framework ms", "speedup"};
    for (const auto& c : dec["routes"])
      ds.rows.push_back({str(c["label"]), str(c["route"]), num(c["ms_median"]),
                         num(c["ref_ms_median"]), num(c["speedup"])});
  }
  const json* rel = find_stage(report, "release");
  if (rel)
    ds.lines.push_back(
        "Release stage: " + rel->value("status", "") +
        (rel->at("data").contains("kind") ? " (" + str(rel->at("data")["kind"]) + ")" : ""));
  out.push_back(ds);

  const json& w = report["spec"].value("warnings", json::array());
  if (!w.empty()) {
    Section ws{"Spec warnings", {}, {}, {}};
    for (const auto& x : w)
      ws.lines.push_back("- " + str(x));
    out.push_back(ws);
  }
  return out;
}

std::string report_markdown(const json& report) {
  std::ostringstream md;
  const json& spec = report["spec"];
  md << "# TilePilot pilot: " << str(spec["operator"]) << " on " << str(spec["device"]) << "\n\n"
     << "Spec: `" << str(spec.value("file", json())) << "`. Decision: **"
     << str(report["decision"].value("decision", json())) << "**.\n";
  for (const Section& s : report_sections(report)) {
    md << "\n## " << s.title << "\n\n";
    for (const auto& l : s.lines)
      md << l << (l.rfind("- ", 0) == 0 ? "\n" : "\n\n");
    if (s.header.empty()) continue;
    md << "|";
    for (const auto& h : s.header)
      md << " " << h << " |";
    md << "\n|";
    for (size_t i = 0; i < s.header.size(); ++i)
      md << "---|";
    md << "\n";
    for (const auto& row : s.rows) {
      md << "|";
      for (const auto& c : row)
        md << " " << c << " |";
      md << "\n";
    }
  }
  return md.str();
}

} // namespace tp::pilot
