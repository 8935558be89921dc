// report.html: one self-contained page (inline CSS and SVG, no scripts or external files) with
// the report's sections and four plots: latency per shape vs the reference, the error
// distribution, cold vs warm compile, and the model-level effect. A plot whose stage did not
// run shows that stage's `not run: <reason>` instead.
#include <cmath>
#include <sstream>

#include "pilot/Report.h"
#include "pilot/Svg.h"

namespace tp::pilot {

namespace {

using json = nlohmann::json;

const json* find_stage(const json& report, const std::string& name) {
  for (const auto& s : report["stages"])
    if (s.value("name", "") == name) return &s;
  return nullptr;
}

/// The stage's data when it ran, else nullptr with `why` set to its status.
const json* ran(const json& report, const std::string& name, std::string* why) {
  const json* s = find_stage(report, name);
  if (!s) {
    *why = "not run: stage missing from the report";
    return nullptr;
  }
  std::string status = s->value("status", "");
  if (status != "passed" && status != "failed") {
    *why = status;
    return nullptr;
  }
  return &s->at("data");
}

double val(const json& j, const char* k) {
  return j.contains(k) && j[k].is_number() ? j[k].get<double>() : NAN;
}

std::string latency_plot(const json& report) {
  std::string why;
  const json* d = ran(report, "warm", &why);
  if (!d) return svg::not_run("Latency per shape vs the reference", why);
  svg::BarChart c{"Latency per shape vs the reference", "ms (median)", {}, {}, true, {}, ""};
  svg::Series ours{"TilePilot", "#4e79a7", {}, {}, {}}, ref{"reference", "#f28e2b", {}, {}, {}};
  for (const auto& x : d->value("cases", json::array())) {
    c.labels.push_back(x.value("dtype", "") + " " + x.value("shape", ""));
    ours.values.push_back(val(x, "ms_median"));
    ref.values.push_back(val(x, "ref_ms_median"));
    if (!x.value("ref_name", "").empty()) ref.name = x.value("ref_name", "");
  }
  c.series = {ours, ref};
  return svg::render(c);
}

std::string error_plot(const json& report) {
  std::string why;
  const json* d = ran(report, "correctness", &why);
  if (!d || d->value("cases", json::array()).empty())
    return svg::not_run("Error distribution", why.empty() ? "not run: no cases" : why);
  svg::BarChart c{
      "Error distribution: max |out - ref| per case", "max_abs_err", {}, {}, true, {}, ""};
  svg::Series s{"max_abs_err", "#59a14f", {}, {}, {}};
  for (const auto& x : (*d)["cases"]) {
    c.labels.push_back(std::to_string(x.value("case", 0)) + " " + x.value("dtype", "") + " " +
                       x.value("shape", ""));
    s.values.push_back(val(x, "max_abs_err"));
    c.threshold = val(x, "atol");
  }
  c.threshold_label = "atol (each element may also use rtol |ref|)";
  c.series = {s};
  return svg::render(c);
}

std::string compile_plot(const json& report) {
  std::string why;
  const json* d = ran(report, "compile", &why);
  if (!d) return svg::not_run("Cold vs warm compile", why);
  svg::BarChart c{"Cold vs warm compile per kernel", "ms", {}, {}, true, {}, ""};
  svg::Series cold{"cold", "#e15759", {}, {}, {}}, warm{"warm (cache hit)", "#76b7b2", {}, {}, {}},
      nvrtc{"NVRTC only", "#b07aa1", {}, {}, {}};
  bool any_timed = false;
  for (const auto& k : d->value("kernels", json::array())) {
    c.labels.push_back(k.value("kernel", ""));
    cold.values.push_back(val(k, "cold_ms"));
    warm.values.push_back(val(k, "warm_ms"));
    nvrtc.values.push_back(val(k, "nvrtc_ms"));
    any_timed = any_timed || std::isfinite(val(k, "cold_ms"));
  }
  if (any_timed) c.series = {cold, warm};
  c.series.push_back(nvrtc);
  if (!any_timed) c.title += " (cold/warm " + d->value("cold_warm", std::string("not run")) + ")";
  return svg::render(c);
}

std::string model_plot(const json& report) {
  std::string why;
  const json* d = ran(report, "model", &why);
  if (!d) return svg::not_run("Model-level effect", why);
  svg::BarChart c{
      "Model-level effect: " + d->value("model", ""), "ms per run", {}, {}, false, {}, ""};
  c.labels = {"framework operator", "TilePilot kernel"};
  svg::Series s{
      "end-to-end latency", "#4e79a7", {val(*d, "baseline_ms"), val(*d, "kernel_ms")}, {}, {}};
  // The CI on the change, drawn on the kernel bar as a latency interval.
  double base = val(*d, "baseline_ms");
  if (d->contains("ci95_pct")) {
    s.lo = {NAN, base * (1 + (*d)["ci95_pct"][0].get<double>() / 100)};
    s.hi = {NAN, base * (1 + (*d)["ci95_pct"][1].get<double>() / 100)};
  }
  c.series = {s};
  return svg::render(c);
}

void table(std::ostringstream& h, const Section& s) {
  h << "<table><tr>";
  for (const auto& x : s.header)
    h << "<th>" << svg::escape(x) << "</th>";
  h << "</tr>";
  for (const auto& row : s.rows) {
    h << "<tr>";
    for (const auto& x : row) {
      bool bad = x == "**no**";
      h << "<td" << (bad ? " class=\"bad\"" : "") << ">" << svg::escape(bad ? "no" : x) << "</td>";
    }
    h << "</tr>";
  }
  h << "</table>";
}

} // namespace

std::string report_html(const json& report) {
  const json& spec = report["spec"];
  std::string title =
      "TilePilot pilot: " + spec.value("operator", "") + " on " + spec.value("device", "");
  std::string decision = report["decision"].value("decision", "");
  std::ostringstream h;
  h << "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>" << svg::escape(title)
    << "</title><style>body{font-family:sans-serif;max-width:1100px;margin:24px auto;"
       "padding:0 16px;color:#222}table{border-collapse:collapse;margin:8px 0 16px;"
       "font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}"
       "th{background:#f3f3f3}.bad{color:#b00;font-weight:bold}.decision{font-size:18px;"
       "padding:10px 14px;border-radius:6px;background:#eef3fa;display:inline-block}"
       "svg{display:block;margin:10px 0}</style></head><body>"
    << "<h1>" << svg::escape(title) << "</h1><p>Spec: <code>" << svg::escape(spec.value("file", ""))
    << "</code></p><p class=\"decision\">Decision: <b>" << svg::escape(decision)
    << "</b></p><h2>Plots</h2>" << latency_plot(report) << error_plot(report)
    << compile_plot(report) << model_plot(report);
  for (const Section& s : report_sections(report)) {
    h << "<h2>" << svg::escape(s.title) << "</h2>";
    bool in_list = false;
    for (const auto& l : s.lines) {
      bool item = l.rfind("- ", 0) == 0;
      if (item && !in_list) h << "<ul>";
      if (!item && in_list) h << "</ul>";
      in_list = item;
      std::string text = item ? l.substr(2) : l;
      if (text.size() > 4 && text.rfind("**", 0) == 0)
        h << "<p><b>" << svg::escape(text.substr(2, text.size() - 4)) << "</b></p>";
      else
        h << (item ? "<li>" : "<p>") << svg::escape(text) << (item ? "</li>" : "</p>");
    }
    if (in_list) h << "</ul>";
    if (!s.header.empty()) table(h, s);
  }
  h << "</body></html>\n";
  return h.str();
}

} // namespace tp::pilot
