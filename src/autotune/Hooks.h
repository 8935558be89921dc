// The tuner's view of a backend: three hooks that compile, check and time one config, and the
// number of devices it times on. The tuner owns the search (order, pruning, parallel compile,
// early stop, limits, spreading measurements over devices); the backend owns everything that
// touches NVRTC or the GPU. The CUDA backend registers its hooks once with
// set_default_hooks(); tests pass fakes directly to tune().
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ops/Operator.h"
#include "runtime/ResourceUsage.h"

namespace tp::autotune {

/// What compiling one config produced.
struct CompiledCandidate {
  /// The ptxas report (registers, spills). registers = -1 means "not reported": no
  /// post-compile pruning happens for that candidate.
  rt::ResourceUsage usage;
  /// Backend-owned result (a loaded module, a cubin). Opaque here; handed back to check and
  /// measure, and dropped as soon as the candidate has been decided.
  std::shared_ptr<void> artifact;
};

/// Per-iteration kernel times of one measurement, in milliseconds.
struct Measurement {
  std::vector<double> ms;
  double median_ms() const; // NaN when empty
  double iqr_ms() const;    // interquartile range; 0 with fewer than 4 samples
};

struct TuneHooks {
  /// Builds, verifies and compiles `config`. Runs on worker threads, several at once, so it
  /// must be thread-safe. Throws on failure: a tp::UserError means the config is invalid
  /// (builder/verifier rejected it); any other exception is a compile failure.
  std::function<CompiledCandidate(const ops::Config& config)> compile;
  /// How many devices check_correct and measure run on: both take a device index in
  /// [0, devices). The tuner calls them from one thread per device, so calls for different
  /// devices overlap (hooks must allow that) while calls for one device never do, because
  /// timings taken concurrently on one GPU are meaningless.
  int devices = 1;
  /// Runs the compiled kernel on checked inputs on `device`; false (with *why) when outputs are
  /// wrong. Called only for a candidate that would become the best, on the device it was
  /// measured on.
  std::function<bool(int device, const ops::Config& config, const CompiledCandidate& compiled,
                     std::string* why)>
      check_correct;
  /// Times `iters` runs on `device` and returns one sample per run.
  std::function<Measurement(int device, const ops::Config& config,
                            const CompiledCandidate& compiled, int iters)>
      measure;
  /// Why `measure` is empty ("no CUDA driver: ..."); shown by `tilepilot tune`.
  std::string why_no_measure;
  /// Which devices measure, and any visible device left out and why; shown by `tilepilot tune`.
  std::string devices_note;
};

/// An exception's message for embedding in a reason: what() without the "error: " prefix (and
/// source location) that tp::UserError messages start with.
std::string reason_text(const std::exception& e);

/// Makes the hooks for one problem on one target arch ("sm_90a"): the hooks above take only a
/// config, so whatever else compiling and timing need (operator, shape, dtype, device) is bound
/// here.
using HookFactory = std::function<TuneHooks(const ops::Operator& op, const ops::Problem& problem,
                                            const std::string& arch)>;

/// Registration point for the CUDA backend: the factory `tilepilot tune` and the adaptive policy
/// use when the caller gives no hooks. A backend that can compile but finds no GPU returns hooks
/// with `measure` empty and `why_no_measure` set. Replaces any earlier registration.
void set_default_hooks(HookFactory factory);

/// Whether a factory is registered.
bool has_default_hooks();

/// The registered backend's hooks for (op, problem, arch); nullopt when no backend registered.
std::optional<TuneHooks> default_hooks(const ops::Operator& op, const ops::Problem& problem,
                                       const std::string& arch);

} // namespace tp::autotune
