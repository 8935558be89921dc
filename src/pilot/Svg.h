// A small SVG writer for the HTML report's plots: grouped bar charts with optional error
// whiskers, a log scale and a horizontal threshold line. Output is one self-contained <svg>
// element; a chart without data shows its `not run: <reason>` text instead of bars.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace tp::pilot::svg {

struct Series {
  std::string name, color;    // color: any SVG color, e.g. "#4e79a7"
  std::vector<double> values; // one per label; NaN: no bar
  std::vector<double> lo, hi; // optional whisker ends, one per label (NaN: none)
};

struct BarChart {
  std::string title, y_label;
  std::vector<std::string> labels;
  std::vector<Series> series;
  bool log_y = false;
  std::optional<double> threshold; // dashed line, e.g. atol
  std::string threshold_label;
};

std::string render(const BarChart& c);
/// A chart-sized box that says why there is no chart.
std::string not_run(const std::string& title, const std::string& reason);
/// Escapes &, <, >, " for SVG/HTML text.
std::string escape(const std::string& s);

} // namespace tp::pilot::svg
