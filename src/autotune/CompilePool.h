// A pool of CPU threads that compiles candidates ahead of the measuring thread, in order, a
// bounded window ahead. A compile cannot be interrupted (NVRTC has no cancel), so one that
// overruns its limit is abandoned: the caller moves on, a replacement worker keeps the pool at
// full strength, and the stuck worker discards its result whenever it finishes.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "autotune/Hooks.h"

namespace tp::autotune {

class CompilePool {
public:
  struct Outcome {
    enum class Kind { ok, user_error, error, timed_out } kind = Kind::ok;
    CompiledCandidate compiled;
    std::string error; // what() of the exception, or why it timed out
    double seconds = 0;
  };

  /// Starts `threads` workers over `configs`; at most `window` configs past the one last
  /// waited for are compiled ahead.
  CompilePool(std::function<CompiledCandidate(const ops::Config&)> compile,
              std::vector<ops::Config> configs, int threads, size_t window, double limit_s);
  /// Stops handing out work and waits for running compiles, each at most until its limit.
  /// Then the compile hook and the results never waited for are freed on this thread, unless
  /// a compile that overran its limit still runs: its worker frees them when it finishes.
  ~CompilePool();
  CompilePool(const CompilePool&) = delete;
  CompilePool& operator=(const CompilePool&) = delete;

  /// The result of config `i` (ask in increasing order), waiting at most until `limit_s`
  /// after its compile started.
  Outcome wait(size_t i);

  struct State; // shared with the detached workers; defined in CompilePool.cpp

private:
  std::shared_ptr<State> state_;
};

} // namespace tp::autotune
