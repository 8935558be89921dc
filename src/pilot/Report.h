// Pilot reports. report.json is the record (stable top-level keys: format, spec, environment,
// stages[], decision); report.md and report.html are rendered from it alone, so either can be
// regenerated from a saved report.json. Sections are built once (ReportSections.cpp) and
// rendered as Markdown tables or HTML tables plus inline SVG plots.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tp::pilot {

struct PilotRun;

inline constexpr const char* kReportFormat = "tilepilot-pilot-report/1";

nlohmann::json build_report(const PilotRun& r, const std::string& decision);

/// One report section: a title, lines of prose (e.g. "not run: ..."), and an optional table.
struct Section {
  std::string title;
  std::vector<std::string> lines;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

std::vector<Section> report_sections(const nlohmann::json& report);

std::string report_markdown(const nlohmann::json& report);
std::string report_html(const nlohmann::json& report);

/// A number for a table: 4 significant digits, or "-" for a missing value.
std::string num(const nlohmann::json& v);

} // namespace tp::pilot
