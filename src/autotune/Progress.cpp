// The tuner's progress bar.
#include "autotune/Progress.h"

#include <cstdio>
#include <unistd.h>

namespace tp::autotune {

ProgressBar::ProgressBar(bool enabled, std::string label, size_t total)
    : enabled_(enabled), label_(std::move(label)), total_(total) {}

ProgressBar::~ProgressBar() {
  if (enabled_ && last_width_ > 0) std::fputc('\n', stderr);
}

bool ProgressBar::stderr_is_terminal() {
  return isatty(STDERR_FILENO) == 1;
}

void ProgressBar::update(size_t done, const std::string& note) {
  if (!enabled_) return;
  constexpr size_t kBar = 30;
  size_t filled = total_ ? done * kBar / total_ : kBar;
  std::string line = "\r" + label_ + " [" + std::string(filled, '#') +
                     std::string(kBar - filled, '.') + "] " + std::to_string(done) + "/" +
                     std::to_string(total_) + (note.empty() ? "" : "  " + note);
  // Pad so a shorter line fully overwrites the previous one.
  size_t width = line.size();
  if (width < last_width_) line += std::string(last_width_ - width, ' ');
  last_width_ = width;
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

} // namespace tp::autotune
