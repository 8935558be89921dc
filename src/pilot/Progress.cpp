// The terminal progress line.
#include "pilot/Progress.h"

#include <cstdio>
#include <unistd.h>

namespace tp::pilot {

Progress::Progress(bool enabled) : enabled_(enabled), start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() {
  done();
}

bool Progress::stderr_is_tty() {
  return isatty(STDERR_FILENO) == 1;
}

void Progress::stage(const std::string& name) {
  done();
  stage_ = name; // drawn with its first step: quick stages leave no line behind
  start_ = std::chrono::steady_clock::now();
}

void Progress::step(int i, int n, const std::string& what, const std::string& unit) {
  draw(unit + " " + std::to_string(i) + "/" + std::to_string(n) + " " + what);
}

void Progress::draw(const std::string& text) {
  if (!enabled_) return;
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string line = "[" + stage_ + "] " + text;
  if (line.size() > 90) line = line.substr(0, 87) + "...";
  // \r and clear-to-end-of-line: redraw in place.
  std::fprintf(stderr, "\r\033[K%s %.1fs", line.c_str(), s);
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::done() {
  if (!enabled_ || !drawn_) return;
  std::fprintf(stderr, "\n");
  drawn_ = false;
}

} // namespace tp::pilot
