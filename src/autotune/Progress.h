// A one-line progress bar for the tuner on stderr, redrawn in place. Drawn only when enabled
// (by default: when stderr is a terminal), so logs and pipes never see carriage returns.
#pragma once
#include <string>

namespace tp::autotune {

class ProgressBar {
public:
  ProgressBar(bool enabled, std::string label, size_t total);
  ~ProgressBar(); // ends the line
  /// Redraws with `done` of `total` finished and a note (e.g. the best so far).
  void update(size_t done, const std::string& note);
  static bool stderr_is_terminal();

private:
  bool enabled_;
  std::string label_;
  size_t total_;
  size_t last_width_ = 0;
};

} // namespace tp::autotune
