// A one-line progress display on stderr for long stages ("[correctness] case 3/12 OP
// M=4096,... 41.2s"), drawn only when stderr is a terminal so logs and tests stay clean.
#pragma once
#include <chrono>
#include <string>

namespace tp::pilot {

class Progress {
public:
  explicit Progress(bool enabled);
  ~Progress();
  /// True when stderr is a terminal.
  static bool stderr_is_tty();
  void stage(const std::string& name);
  /// "<unit> i/n <what>", e.g. "case 3/12 OP M=4096,...".
  void step(int i, int n, const std::string& what, const std::string& unit = "case");
  /// Ends the current line.
  void done();

private:
  void draw(const std::string& text);
  bool enabled_;
  bool drawn_ = false;
  std::string stage_;
  std::chrono::steady_clock::time_point start_;
};

} // namespace tp::pilot
