// The SVG bar-chart writer.
#include "pilot/Svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace tp::pilot::svg {

namespace {

constexpr double kW = 760, kH = 350, kLeft = 70, kRight = 20, kTop = 52, kBottom = 110;
constexpr size_t kLabelChars = 26; // longer labels are cut; the full text is the tooltip

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v); // 1000, not 1e+03
  return buf;
}

} // namespace

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
    case '&':
      o += "&amp;";
      break;
    case '<':
      o += "&lt;";
      break;
    case '>':
      o += "&gt;";
      break;
    case '"':
      o += "&quot;";
      break;
    default:
      o += c;
    }
  }
  return o;
}

std::string not_run(const std::string& title, const std::string& reason) {
  // Wrap the reason at spaces: SVG text does not wrap by itself.
  std::vector<std::string> lines(1);
  std::istringstream words(reason);
  for (std::string w; words >> w;) {
    if (!lines.back().empty() && lines.back().size() + w.size() > 95) lines.emplace_back();
    lines.back() += (lines.back().empty() ? "" : " ") + w;
  }
  double h = 60 + 18 * static_cast<double>(lines.size());
  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kW << "\" height=\"" << h
     << "\" font-family=\"sans-serif\"><rect x=\"0.5\" y=\"0.5\" width=\"" << kW - 1
     << "\" height=\"" << h - 1 << "\" fill=\"#fafafa\" stroke=\"#ccc\"/>"
     << "<text x=\"16\" y=\"28\" font-size=\"15\" font-weight=\"bold\">" << escape(title)
     << "</text>";
  for (size_t i = 0; i < lines.size(); ++i)
    os << "<text x=\"16\" y=\"" << 56 + 18 * static_cast<double>(i)
       << "\" font-size=\"13\" fill=\"#a33\">" << escape(lines[i]) << "</text>";
  os << "</svg>";
  return os.str();
}

std::string render(const BarChart& c) {
  // Value range over bars and whiskers; a log axis spans whole decades.
  double lo = c.log_y ? INFINITY : 0, hi = 0;
  auto see = [&](double v) {
    if (!std::isfinite(v) || (c.log_y && v <= 0)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  };
  for (const auto& s : c.series) {
    for (double v : s.values)
      see(v);
    for (double v : s.hi)
      see(v);
  }
  if (c.threshold) see(*c.threshold);
  if (hi <= 0 || !std::isfinite(lo)) return not_run(c.title, "no data to plot");
  if (c.log_y) {
    lo = std::pow(10, std::floor(std::log10(lo)));
    hi = std::pow(10, std::ceil(std::log10(hi * 1.0001)));
  } else {
    hi *= 1.1;
  }
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  auto y_of = [&](double v) {
    double t =
        c.log_y ? (std::log10(std::max(v, lo)) - std::log10(lo)) / (std::log10(hi) - std::log10(lo))
                : v / hi;
    return kTop + ph * (1 - std::clamp(t, 0.0, 1.0));
  };
  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kW << "\" height=\"" << kH
     << "\" font-family=\"sans-serif\">"
     << "<text x=\"" << kLeft << "\" y=\"22\" font-size=\"15\" font-weight=\"bold\">"
     << escape(c.title) << "</text>";
  // Axis ticks: decades on a log axis, five steps otherwise.
  std::vector<double> ticks;
  if (c.log_y)
    for (double t = lo; t <= hi * 1.0001; t *= 10)
      ticks.push_back(t);
  else
    for (int i = 0; i <= 5; ++i)
      ticks.push_back(hi * i / 5);
  for (double t : ticks)
    os << "<line x1=\"" << kLeft << "\" x2=\"" << kW - kRight << "\" y1=\"" << y_of(t) << "\" y2=\""
       << y_of(t) << "\" stroke=\"#eee\"/><text x=\"" << kLeft - 6 << "\" y=\"" << y_of(t) + 4
       << "\" font-size=\"11\" text-anchor=\"end\">" << fmt(t) << "</text>";
  os << "<text transform=\"translate(14," << kTop + ph / 2 << ") rotate(-90)\" font-size=\"12\""
     << " text-anchor=\"middle\">" << escape(c.y_label) << "</text>";
  size_t n = c.labels.size(), k = std::max<size_t>(1, c.series.size());
  double group = pw / std::max<size_t>(1, n), bar = group * 0.8 / static_cast<double>(k);
  for (size_t i = 0; i < n; ++i) {
    double x0 = kLeft + group * static_cast<double>(i) + group * 0.1;
    for (size_t s = 0; s < c.series.size(); ++s) {
      const Series& se = c.series[s];
      double v = i < se.values.size() ? se.values[i] : NAN;
      double x = x0 + bar * static_cast<double>(s);
      if (std::isfinite(v) && !(c.log_y && v <= 0)) {
        double y = y_of(v);
        os << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << bar * 0.95 << "\" height=\""
           << kTop + ph - y << "\" fill=\"" << se.color << "\"><title>"
           << escape(se.name + " " + c.labels[i] + ": " + fmt(v)) << "</title></rect>";
      }
      if (i < se.lo.size() && i < se.hi.size() && std::isfinite(se.lo[i]) &&
          std::isfinite(se.hi[i])) {
        double xm = x + bar * 0.475;
        os << "<line x1=\"" << xm << "\" x2=\"" << xm << "\" y1=\"" << y_of(se.lo[i]) << "\" y2=\""
           << y_of(se.hi[i]) << "\" stroke=\"#222\"/>";
      }
    }
    double xl = x0 + group * 0.4;
    std::string label = c.labels[i].size() > kLabelChars
                            ? c.labels[i].substr(0, kLabelChars - 3) + "..."
                            : c.labels[i];
    os << "<text transform=\"translate(" << xl << "," << kTop + ph + 12
       << ") rotate(35)\" font-size=\"10\"><title>" << escape(c.labels[i]) << "</title>"
       << escape(label) << "</text>";
  }
  if (c.threshold) {
    double y = y_of(*c.threshold);
    os << "<line x1=\"" << kLeft << "\" x2=\"" << kW - kRight << "\" y1=\"" << y << "\" y2=\"" << y
       << "\" stroke=\"#c00\" stroke-dasharray=\"5,4\"/><text x=\"" << kW - kRight << "\" y=\""
       << y - 4 << "\" font-size=\"11\" fill=\"#c00\" text-anchor=\"end\">"
       << escape(c.threshold_label) << "</text>";
  }
  double lx = kLeft; // legend: one row under the title
  for (const auto& s : c.series) {
    os << "<rect x=\"" << lx << "\" y=\"30\" width=\"12\" height=\"12\" fill=\"" << s.color
       << "\"/><text x=\"" << lx + 16 << "\" y=\"40\" font-size=\"12\">" << escape(s.name)
       << "</text>";
    lx += 30 + 7.0 * static_cast<double>(s.name.size());
  }
  os << "<line x1=\"" << kLeft << "\" x2=\"" << kLeft << "\" y1=\"" << kTop << "\" y2=\""
     << kTop + ph << "\" stroke=\"#444\"/><line x1=\"" << kLeft << "\" x2=\"" << kW - kRight
     << "\" y1=\"" << kTop + ph << "\" y2=\"" << kTop + ph << "\" stroke=\"#444\"/></svg>";
  return os.str();
}

} // namespace tp::pilot::svg
